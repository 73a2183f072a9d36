# Stand-ins for the Vivado commands a generated create_project.tcl uses: each records its call
# and returns what the script needs to go on (cell and pin names, the newest IP version, a run
# directory with a bitstream and a hardware handoff in it). Any other command is an error.
#
#   tclsh vivado_standin.tcl <script.tcl> <record.json>
#
# The record is a JSON list of calls, each a list of strings: [command, arg, arg, ...].

set record {}
set project_dir ""

proc json_string {text} {
    set escaped [string map [list \\ \\\\ \" \\\" \n \\n \r \\r \t \\t] $text]
    return "\"$escaped\""
}

proc note {name arguments} {
    global record
    lappend record [list $name {*}$arguments]
}

proc write_record {path} {
    global record
    set calls {}
    foreach call $record {
        lappend calls "\[[join [lmap word $call {json_string $word}] ,]\]"
    }
    set out [open $path w]
    puts $out "\[[join $calls ",\n"]\]"
    close $out
}

# Commands that only need recording.
foreach name {update_ip_catalog create_bd_design apply_bd_automation connect_bd_intf_net connect_bd_net
              set_property assign_bd_address validate_bd_design save_bd_design add_files
              update_compile_order launch_runs} {
    proc $name {args} "note $name \$args; return {}"
}

proc create_project {args} {
    global project_dir
    note create_project $args
    set positional [lsearch -all -inline -not -glob [lreplace $args [lsearch $args -part] [expr {[lsearch $args -part] + 1}]] -*]
    set project_dir [lindex $positional 1]
    return [lindex $positional 0]
}
proc current_project {args} { return design }
proc current_fileset {args} { return sources_1 }
proc get_ipdefs {args} {
    note get_ipdefs $args
    return [list [string map {* 1.0} [lindex $args end]] [string map {* 9.9} [lindex $args end]]]
}
proc get_board_parts {args} {
    note get_board_parts $args
    return [list [string map {* 1.1} [lindex $args end]]]
}
proc create_bd_cell {args} {
    note create_bd_cell $args
    return /[lindex $args end]
}
proc get_bd_cells {args} { return /[lindex $args end] }
proc get_bd_pins {args} { return /[lindex $args end] }
proc get_bd_intf_pins {args} { return /[lindex $args end] }
proc get_files {args} { return [file join $::project_dir design.srcs sources_1 bd design [lindex $args end]] }
proc make_wrapper {args} {
    note make_wrapper $args
    return [file join $::project_dir design.gen sources_1 bd design hdl design_wrapper.v]
}
proc get_runs {args} { return [lindex $args end] }
proc get_property {name object} {
    switch -- $name {
        PROGRESS { return 100% }
        DIRECTORY { return [file join $::project_dir design.runs $object] }
    }
    error "stand-in get_property: no property $name"
}
# The run leaves what Vivado would: the bitstream in the run directory, the handoff in .gen.
proc wait_on_run {args} {
    global project_dir
    note wait_on_run $args
    set run [file join $project_dir design.runs [lindex $args end]]
    set handoff [file join $project_dir design.gen sources_1 bd design hw_handoff]
    file mkdir $run $handoff
    close [open [file join $run design_wrapper.bit] w]
    close [open [file join $handoff design.hwh] w]
}

proc unknown {args} {
    error "stand-in: Vivado command [lindex $args 0] is not defined in vivado_standin.tcl"
}

set script [lindex $argv 0]
set status [catch {source $script} message]
note done [list $status $message]
write_record [lindex $argv 1]
exit $status
