"""Boards as data: ``model`` (FpgaCore, CpuCore, Link, Board and the vendor tools' facts) and ``load``
(the board files' hardened reader and validation, the split of the fabric into cores)."""
