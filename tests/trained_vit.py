"""A small ViT trained with PyTorch (CPU, seeded) on a learnable synthetic image task, exported to
ONNX: the classifier whose top-1 agreement between the cores and onnxruntime means something (a
random-weight classifier's logits sit near ties, so rounding alone flips its argmax).

The task (``task_images``): ten classes of oriented sine gratings, five orientations (0°, 36°, ...,
144°) at two spatial frequencies (2 and 4 periods across the 32-pixel image), each image at a random
phase, amplitude and per-channel gain, plus Gaussian noise, clipped to [-1, 1]. The model
(``TinyVit``) is the zoo's ``vit_encoder`` layout written in PyTorch: patch embedding as a strided
Conv (kernel = stride = 8, 64 channels), a class token in front of the 16 patches, a position
embedding, 4 post-LN encoder blocks of 4 heads (MatMul Q·Kᵀ, Softmax, MatMul with V, erf GELU MLP of
256) and a linear classifier on the class token. Trained for ``STEPS`` AdamW steps of ``BATCH``
fresh samples on one thread (16 s of CPU: 34 s on a loaded 2-core machine; 99.2% float accuracy
on held-out images), then exported at batch 1 (TorchScript exporter, opset 17).

``trained_vit()`` returns the ONNX model from a cache file keyed by this file's hash and the torch
version (``.cache/trained/`` at the repository root, or ``$FPGAPLACE_TRAINED_CACHE``), training it
on a miss; so the tests and ``scripts/bench_attention_top1.py`` train once per change of this file.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import warnings
from pathlib import Path

import numpy as np
import onnx

IMAGE, PATCH, CHANNELS, HIDDEN, HEADS, LAYERS, CLASSES = 32, 8, 3, 64, 4, 4, 10
STEPS, BATCH, SEED = 300, 64, 2026
NOISE = 0.8


def task_images(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` seeded images of the grating task ``[count, 3, 32, 32]`` (float32) and their
    classes (module docstring). O(count × 3 × 32 × 32)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, count)
    angle = (labels % 5) * math.pi / 5
    periods = np.where(labels < 5, 2.0, 4.0)
    ys, xs = np.meshgrid(np.arange(IMAGE), np.arange(IMAGE), indexing="ij")
    along = (np.cos(angle)[:, None, None] * xs + np.sin(angle)[:, None, None] * ys) / IMAGE
    phase = rng.uniform(0, 2 * math.pi, (count, 1, 1))
    wave = np.sin(2 * math.pi * periods[:, None, None] * along + phase)
    amplitude = rng.uniform(0.25, 0.65, (count, 1, 1, 1))
    gain = rng.uniform(0.5, 1.0, (count, CHANNELS, 1, 1))
    noise = rng.normal(0, NOISE, (count, CHANNELS, IMAGE, IMAGE))
    images = np.clip(amplitude * gain * wave[:, None] + noise, -1, 1)
    return images.astype(np.float32), labels


def _module():
    """The PyTorch model class (imported here: torch is a test-only dependency)."""
    import torch
    from torch import nn

    class Block(nn.Module):
        """One post-LN encoder block, the heads split and merged by Reshape and Transpose."""

        def __init__(self) -> None:
            super().__init__()
            self.query, self.key, self.value, self.out = (nn.Linear(HIDDEN, HIDDEN) for _ in range(4))
            self.ln1, self.ln2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)
            self.ffn_in, self.ffn_out = nn.Linear(HIDDEN, 4 * HIDDEN), nn.Linear(4 * HIDDEN, HIDDEN)
            self.gelu = nn.GELU()

        def forward(self, x):
            batch, tokens, depth = x.shape[0], x.shape[1], HIDDEN // HEADS
            q, k, v = (f(x).reshape(batch, tokens, HEADS, depth).transpose(1, 2) for f in (self.query, self.key,
                                                                                            self.value))
            scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(depth))
            context = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(batch, tokens, HIDDEN)
            x = self.ln1(x + self.out(context))
            return self.ln2(x + self.ffn_out(self.gelu(self.ffn_in(x))))

    class TinyVit(nn.Module):
        """The ViT of the module docstring."""

        def __init__(self) -> None:
            super().__init__()
            patches = (IMAGE // PATCH) ** 2
            self.embed = nn.Conv2d(CHANNELS, HIDDEN, PATCH, stride=PATCH)
            self.class_token = nn.Parameter(0.02 * torch.randn(1, 1, HIDDEN))
            self.position = nn.Parameter(0.02 * torch.randn(1, patches + 1, HIDDEN))
            self.blocks = nn.Sequential(*(Block() for _ in range(LAYERS)))
            self.head = nn.Linear(HIDDEN, CLASSES)

        def forward(self, image):
            batch = image.shape[0]
            x = self.embed(image).reshape(batch, HIDDEN, -1).transpose(1, 2)
            x = torch.cat([self.class_token.expand(batch, -1, -1), x], dim=1) + self.position
            x = self.blocks(x)
            return self.head(x.reshape(batch, -1)[:, :HIDDEN])  # the class token, as a Slice

    return TinyVit


def train(steps: int = STEPS) -> tuple[onnx.ModelProto, float]:
    """Train ``TinyVit`` (seeded, deterministic on CPU) for ``steps`` batches of fresh task images and
    export it at batch 1; the model and its float accuracy on 1,000 held-out images (seed 1).
    O(steps × BATCH) forward and backward passes."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # deterministic, and faster on a shared machine than threads that spin
    try:
        return _train(torch, steps)
    finally:
        torch.set_num_threads(threads)


def _train(torch, steps: int) -> tuple[onnx.ModelProto, float]:
    """``train`` on one thread."""
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    model = _module()()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=2e-3, total_steps=steps, pct_start=0.1)
    for step in range(steps):
        images, labels = task_images(BATCH, seed=SEED + 1000 + step)
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(images)), torch.from_numpy(labels))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    model.eval()
    images, labels = task_images(1000, seed=1)
    with torch.no_grad():
        accuracy = float((model(torch.from_numpy(images)).argmax(-1).numpy() == labels).mean())
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notes: it works, and needs no onnxscript
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(model, torch.zeros(1, CHANNELS, IMAGE, IMAGE), buffer, dynamo=False, opset_version=17,
                          input_names=["image"], output_names=["logits"], do_constant_folding=True)
    exported = onnx.load_from_string(buffer.getvalue())
    exported.graph.name = "trained_vit"
    return exported, accuracy


def cache_path() -> Path:
    """The cache file of the current version of this file and of torch."""
    import torch

    key = hashlib.sha256(Path(__file__).read_bytes() + torch.__version__.encode()).hexdigest()[:16]
    folder = Path(os.environ.get("FPGAPLACE_TRAINED_CACHE", Path(__file__).resolve().parents[1] / ".cache" / "trained"))
    return folder / f"trained_vit_{key}.onnx"


def trained_vit() -> tuple[onnx.ModelProto, float]:
    """The trained, exported ViT and its float accuracy on held-out task images, from the cache
    (``cache_path``) or trained and cached on a miss (module docstring)."""
    path = cache_path()
    if not path.is_file():
        model, accuracy = train()
        onnx.helper.set_model_props(model, {"float_accuracy": f"{accuracy:.6f}"})
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        onnx.save(model, partial)
        partial.replace(path)  # atomic: parallel test workers never read a half-written file
        for stale in path.parent.glob("trained_vit_*.onnx"):  # earlier versions of this file's model
            if stale != path:
                stale.unlink(missing_ok=True)
    model = onnx.load(path)
    accuracy = float({p.key: p.value for p in model.metadata_props}["float_accuracy"])
    return model, accuracy
