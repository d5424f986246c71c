# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_edgerec_global_optspecs
    string join \n h/help V/version
end

function __fish_edgerec_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_edgerec_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_edgerec_using_subcommand
    set -l cmd (__fish_edgerec_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c edgerec -n "__fish_edgerec_needs_command" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_needs_command" -s V -l version -d 'Print version'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "run" -d 'Record until SIGINT/SIGTERM (or --duration)'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "record" -d 'Record ROS 2 topics into a bag directory until SIGINT, with `ros2 bag record`\'s flags and the same pipeline as `run`'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "info" -d 'Describe a bag: a rosbag2 directory or an MCAP file (like `ros2 bag info`), or a ROS 1 .bag (like `rosbag info`). Exit 1 when a file cannot be read'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "cat" -d 'Print decoded messages of any bag, one a line (`--json`: one JSON object a line), like `rostopic echo -b` / `ros2 bag` without ROS'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "convert" -d 'Convert a ROS 1 bag to MCAP (`ros1` profile, as `mcap convert`) or, with `--to ros2`, to a rosbag2 bag directory in CDR (as rosbags-convert)'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "filter" -d 'Copy the part of a bag that matters into a new MCAP file or bag directory: topics by name or pattern, a log-time window; exit 3 when an input file was cut or corrupt (kept up to the damage)'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "reindex" -d 'Write an indexed copy of an unindexed ROS 1 bag (a `.bag.active` left by a power cut), keeping every whole message, those of a cut last chunk included; the original is not touched'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "export" -d 'Export from a bag: `export csv BAG --topic T -o F.csv`, `export candump BAG -o F.log`, `export pcap BAG -o F.pcap`, `export video BAG --topic T -o OUT.mp4`'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "import" -d 'Import into a bag: `import candump F.log -o BAG`'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "check" -d 'Verify a bag (structure, index and every CRC the format has) or a configuration file; exit 0 when valid, 1 for a bag that is not, 78 (as `run`) for a configuration that is not'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "recover" -d 'Recover unfinished segments (`.mcap.active`, left by a crash or power cut) into closed files, and rewrite the bag\'s metadata.yaml; a ROS 1 `.bag.active` is reindexed beside itself (as `reindex`). Exit 0 when nothing was lost beyond the unsynced tail, 3 when a corrupt record was skipped, 1 when nothing was recoverable'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "status" -d 'Show a running recorder\'s status: health and why, clock, storage, sources, metrics with their origins, stages and the watchdog'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "leds" -d 'Show a health state on the board\'s LEDs (`[leds]` of the configuration) and exit. systemd\'s `edgerec-fault-led.service` runs `edgerec leds fault` when edgerec.service has failed for good (a configuration error, or a crash loop); by hand it checks the LED names on a new carrier'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "upload" -d 'Send bag directories (or files) to the S3-compatible object store of `[offload]`: each file once (what the store holds already, same SHA-256, is skipped), large files in parts with a Content-MD5 each, `metadata.yaml` of a bag last. Exit 0 when every file is there, 1 when one could not be sent, 78 for a configuration or credentials error'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "ctl" -d 'Give a running recorder a command over its control socket (`health.control_socket`): pause, resume, split, is-paused, status (the snapshot as JSON), list (the sessions, segments and event clips on the vehicle with their time ranges and upload state, as JSON), or trigger [--name NAME] [--pre DURATION] [--post DURATION] [--reason TEXT] (an event clip, in `triggered` and `mixed` mode; `--pre` and `--post` override the rule\'s window, 0 to 1 h). Exit 0 when it was carried out'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "offload" -d 'Offload of a running recorder (`offload.upload`), over its control socket: `status` prints the queue by class, the rate and the link as JSON; `pause` stops sending after the request in flight, `resume` sends again, `retry` tries every waiting file now. Each is logged with who asked. Exit 0 when it was carried out'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "completions" -d 'Print the shell completion script for bash, zsh, fish, elvish or powershell (the image installs bash\'s, zsh\'s and fish\'s)'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "man" -d 'Print the edgerec(1) man page (roff), or with `--dir` write it and one page per subcommand (edgerec-run.1, edgerec-export-video.1, ...)'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "version" -d 'Print the version'
complete -c edgerec -n "__fish_edgerec_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c edgerec -n "__fish_edgerec_using_subcommand run" -s c -l config -d 'The configuration file' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand run" -s d -l duration -d 'Stop after this long (`10s`, `5m`, `1h`)' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand run" -l report-json -d 'Write the final report as JSON to this file' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand run" -l quiet -d 'Never print the live status line, even on a terminal'
complete -c edgerec -n "__fish_edgerec_using_subcommand run" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -s e -l regex -d 'Record topics whose whole name matches this regular expression' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -s x -l exclude-regex -l exclude -d 'Leave out topics whose whole name matches (Humble `-x/--exclude`, Jazzy `--exclude-regex`)' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -l exclude-topic-types -d 'Leave out topics of these types (`pkg/msg/Type`)' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -s p -l polling-interval -d 'How often the graph is looked at for new topics, in ms' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -s o -l output -d 'The bag directory (must not exist). Default `rosbag2_<date>-<time>`' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -s d -l max-bag-duration -d 'Split the bag after this many seconds (0 = never)' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -s b -l max-bag-size -d 'Split the bag at this many bytes (0 = never; else at least 16 MiB)' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -l compression-format -d 'Compress chunks: zstd or lz4' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -l qos-profile-overrides-path -d 'rosbag2\'s QoS override YAML' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -s c -l config -d 'An edgerec configuration for everything else (storage, pipeline, clock); without it, the defaults with no watchdog and no status topics of edgerec\'s own' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -l control-socket -d 'Take `edgerec ctl` commands (pause, resume, split) on this Unix socket while recording' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -s a -l all -d 'Record every topic'
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -l include-hidden-topics -d 'Record hidden topics (a name part starting with `_`) too'
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -l start-paused -d 'Start paused (latched topics are recorded all the same); `edgerec ctl resume` or the `~/resume` service starts recording'
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -l services -d 'Serve rosbag2\'s recorder services (`~/pause`, `~/resume`, `~/is_paused`, `~/split_bagfile`) and `~/trigger` to the domain (`ros.services`; off unless asked: any participant may call them)'
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -l quiet -d 'Never print the live status line'
complete -c edgerec -n "__fish_edgerec_using_subcommand record" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand info" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand cat" -s t -l topic -d 'Only this topic; repeat for several (default: every topic)' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand cat" -s n -l limit -d 'Stop after this many messages' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand cat" -l start -d 'Start at this time: seconds since the epoch (`1700000000.5`) or after the bag\'s first message (`+2.5`)' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand cat" -l end -d 'End at this time (inclusive), as `--start`' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand cat" -l json -d 'One JSON object a line: {"topic","log_time","type","message"}'
complete -c edgerec -n "__fish_edgerec_using_subcommand cat" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand convert" -l to -d '`ros1`: MCAP with the ros1 profile, messages unchanged (as `mcap convert`); `ros2`: a rosbag2 directory in CDR (as rosbags-convert)' -r -f -a "ros1\t''
ros2\t''"
complete -c edgerec -n "__fish_edgerec_using_subcommand convert" -l compression -d 'Chunk compression of the output: none (as rosbag2 and rosbags-convert write), zstd (level 1) or lz4' -r -f -a "none\t''
zstd\t''
lz4\t''"
complete -c edgerec -n "__fish_edgerec_using_subcommand convert" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand filter" -l topics -d 'Keep these topics (by name; several after one flag, or the flag repeated)' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand filter" -l regex -d 'Keep the topics this regular expression matches, whole (`/camera_(front|back)`); repeatable' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand filter" -l exclude -d 'Drop the topics this regular expression matches, whole; repeatable' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand filter" -l start -d 'Keep messages logged at or after this time: seconds since the epoch (`1700000000.5`), nanoseconds (`1700000000500000000ns`), RFC 3339 (`2023-11-14T22:13:20.5Z`) or after the bag\'s first message (`+12.5s`)' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand filter" -l end -d 'Keep messages logged before this time (exclusive), as `--start`' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand filter" -l to -d 'The output\'s kind: `bag` (ROS 1), `mcap` (one file) or `dir` (a rosbag2 bag directory); default from the output\'s name' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand filter" -l compression -d 'Chunk compression of an MCAP output (default: the input\'s; a ROS 1 bag is written uncompressed, as rosbag writes)' -r -f -a "none\t''
zstd\t''
lz4\t''"
complete -c edgerec -n "__fish_edgerec_using_subcommand filter" -l threads -d 'Threads decompressing the input\'s MCAP chunks (default: one per core, at most 8)' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand filter" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand reindex" -s o -l output -d 'The new bag (default: `x.bag` beside `x.bag.active`, else `x.reindexed.bag`)' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand reindex" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and not __fish_seen_subcommand_from csv candump pcap video help" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and not __fish_seen_subcommand_from csv candump pcap video help" -f -a "csv" -d 'One topic of any bag (ROS 1 .bag, .mcap, rosbag2 directory) as CSV: `log_time`, then the message\'s scalars by path, the header stamp first (or the `--fields` named)'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and not __fish_seen_subcommand_from csv candump pcap video help" -f -a "candump" -d 'CAN topics (can_msgs/msg/Frame, ros2_socketcan_msgs/msg/FdFrame) as a `candump -L` log, merged by receive time: what canplayer, SavvyCAN, python-can and cantools read'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and not __fish_seen_subcommand_from csv candump pcap video help" -f -a "pcap" -d 'UDP packet topics (edgerec_msgs/msg/Packet) as a pcap file (Ethernet/IPv4/UDP with the receive times) for Wireshark, VeloView and Ouster Studio'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and not __fish_seen_subcommand_from csv candump pcap video help" -f -a "video" -d 'A video topic (foxglove_msgs/msg/CompressedVideo, H.265) as a playable file, without re-encoding: .mp4, .mov or .mkv timed by the capture timestamps, or .h265/.hevc (the access units, Annex B)'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and not __fish_seen_subcommand_from csv candump pcap video help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from csv" -s t -l topic -d 'The topic' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from csv" -l fields -d 'Only these fields, comma-separated paths (`header.stamp, linear_acceleration.x, ranges[0]`); default every scalar' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from csv" -s o -l output -d 'The CSV file (`-` for standard output)' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from csv" -l start -d 'Start at this time: seconds since the epoch (`1700000000.5`) or after the bag\'s first message (`+2.5`)' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from csv" -l end -d 'End at this time (inclusive), as `--start`' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from csv" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from candump" -s t -l topic -d 'A CAN topic; repeat for several (the classic and FD topics of an interface); none = every CAN topic' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from candump" -s o -l output -d 'The log file' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from candump" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from pcap" -s t -l topic -d 'A packet topic; repeat for several; none = every packet topic' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from pcap" -s o -l output -d 'The pcap file' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from pcap" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from video" -s t -l topic -d 'The video topic' -r
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from video" -s o -l output -d 'The output file; its extension picks the container' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from video" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from help" -f -a "csv" -d 'One topic of any bag (ROS 1 .bag, .mcap, rosbag2 directory) as CSV: `log_time`, then the message\'s scalars by path, the header stamp first (or the `--fields` named)'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from help" -f -a "candump" -d 'CAN topics (can_msgs/msg/Frame, ros2_socketcan_msgs/msg/FdFrame) as a `candump -L` log, merged by receive time: what canplayer, SavvyCAN, python-can and cantools read'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from help" -f -a "pcap" -d 'UDP packet topics (edgerec_msgs/msg/Packet) as a pcap file (Ethernet/IPv4/UDP with the receive times) for Wireshark, VeloView and Ouster Studio'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from help" -f -a "video" -d 'A video topic (foxglove_msgs/msg/CompressedVideo, H.265) as a playable file, without re-encoding: .mp4, .mov or .mkv timed by the capture timestamps, or .h265/.hevc (the access units, Annex B)'
complete -c edgerec -n "__fish_edgerec_using_subcommand export; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c edgerec -n "__fish_edgerec_using_subcommand import; and not __fish_seen_subcommand_from candump help" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand import; and not __fish_seen_subcommand_from candump help" -f -a "candump" -d 'A `candump -L` log as a new bag directory: /can/<interface> (can_msgs/msg/Frame) and /can/<interface>/fd (ros2_socketcan_msgs/msg/FdFrame), as edgerec records them'
complete -c edgerec -n "__fish_edgerec_using_subcommand import; and not __fish_seen_subcommand_from candump help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c edgerec -n "__fish_edgerec_using_subcommand import; and __fish_seen_subcommand_from candump" -s o -l output -d 'The bag directory to make (must not exist)' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand import; and __fish_seen_subcommand_from candump" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand import; and __fish_seen_subcommand_from help" -f -a "candump" -d 'A `candump -L` log as a new bag directory: /can/<interface> (can_msgs/msg/Frame) and /can/<interface>/fd (ros2_socketcan_msgs/msg/FdFrame), as edgerec records them'
complete -c edgerec -n "__fish_edgerec_using_subcommand import; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c edgerec -n "__fish_edgerec_using_subcommand check" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand recover" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand status" -s c -l config -d 'The configuration file, for `health.status_socket`' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand status" -l socket -d 'The status socket (overrides the configuration)' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand status" -l json -d 'Print the snapshot\'s JSON as served'
complete -c edgerec -n "__fish_edgerec_using_subcommand status" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand leds" -s c -l config -d 'The configuration whose `[leds]` to use' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand leds" -l fallback -d 'Used when `--config` cannot be loaded (the broken file is why the recorder failed): the board\'s default configuration' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand leds" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand upload" -s c -l config -d 'The configuration whose `[offload]` to use' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand upload" -s q -l quiet -d 'No progress line, only the summary'
complete -c edgerec -n "__fish_edgerec_using_subcommand upload" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand ctl" -s c -l config -d 'The configuration file, for `health.control_socket`' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand ctl" -l socket -d 'The control socket (overrides the configuration)' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand ctl" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand offload" -s c -l config -d 'The configuration file, for `health.control_socket`' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand offload" -l socket -d 'The control socket (overrides the configuration)' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand offload" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c edgerec -n "__fish_edgerec_using_subcommand completions" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand man" -l dir -d 'Write every page into this directory instead of printing one' -r -F
complete -c edgerec -n "__fish_edgerec_using_subcommand man" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand version" -s h -l help -d 'Print help'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "run" -d 'Record until SIGINT/SIGTERM (or --duration)'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "record" -d 'Record ROS 2 topics into a bag directory until SIGINT, with `ros2 bag record`\'s flags and the same pipeline as `run`'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "info" -d 'Describe a bag: a rosbag2 directory or an MCAP file (like `ros2 bag info`), or a ROS 1 .bag (like `rosbag info`). Exit 1 when a file cannot be read'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "cat" -d 'Print decoded messages of any bag, one a line (`--json`: one JSON object a line), like `rostopic echo -b` / `ros2 bag` without ROS'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "convert" -d 'Convert a ROS 1 bag to MCAP (`ros1` profile, as `mcap convert`) or, with `--to ros2`, to a rosbag2 bag directory in CDR (as rosbags-convert)'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "filter" -d 'Copy the part of a bag that matters into a new MCAP file or bag directory: topics by name or pattern, a log-time window; exit 3 when an input file was cut or corrupt (kept up to the damage)'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "reindex" -d 'Write an indexed copy of an unindexed ROS 1 bag (a `.bag.active` left by a power cut), keeping every whole message, those of a cut last chunk included; the original is not touched'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "export" -d 'Export from a bag: `export csv BAG --topic T -o F.csv`, `export candump BAG -o F.log`, `export pcap BAG -o F.pcap`, `export video BAG --topic T -o OUT.mp4`'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "import" -d 'Import into a bag: `import candump F.log -o BAG`'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "check" -d 'Verify a bag (structure, index and every CRC the format has) or a configuration file; exit 0 when valid, 1 for a bag that is not, 78 (as `run`) for a configuration that is not'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "recover" -d 'Recover unfinished segments (`.mcap.active`, left by a crash or power cut) into closed files, and rewrite the bag\'s metadata.yaml; a ROS 1 `.bag.active` is reindexed beside itself (as `reindex`). Exit 0 when nothing was lost beyond the unsynced tail, 3 when a corrupt record was skipped, 1 when nothing was recoverable'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "status" -d 'Show a running recorder\'s status: health and why, clock, storage, sources, metrics with their origins, stages and the watchdog'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "leds" -d 'Show a health state on the board\'s LEDs (`[leds]` of the configuration) and exit. systemd\'s `edgerec-fault-led.service` runs `edgerec leds fault` when edgerec.service has failed for good (a configuration error, or a crash loop); by hand it checks the LED names on a new carrier'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "upload" -d 'Send bag directories (or files) to the S3-compatible object store of `[offload]`: each file once (what the store holds already, same SHA-256, is skipped), large files in parts with a Content-MD5 each, `metadata.yaml` of a bag last. Exit 0 when every file is there, 1 when one could not be sent, 78 for a configuration or credentials error'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "ctl" -d 'Give a running recorder a command over its control socket (`health.control_socket`): pause, resume, split, is-paused, status (the snapshot as JSON), list (the sessions, segments and event clips on the vehicle with their time ranges and upload state, as JSON), or trigger [--name NAME] [--pre DURATION] [--post DURATION] [--reason TEXT] (an event clip, in `triggered` and `mixed` mode; `--pre` and `--post` override the rule\'s window, 0 to 1 h). Exit 0 when it was carried out'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "offload" -d 'Offload of a running recorder (`offload.upload`), over its control socket: `status` prints the queue by class, the rate and the link as JSON; `pause` stops sending after the request in flight, `resume` sends again, `retry` tries every waiting file now. Each is logged with who asked. Exit 0 when it was carried out'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "completions" -d 'Print the shell completion script for bash, zsh, fish, elvish or powershell (the image installs bash\'s, zsh\'s and fish\'s)'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "man" -d 'Print the edgerec(1) man page (roff), or with `--dir` write it and one page per subcommand (edgerec-run.1, edgerec-export-video.1, ...)'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "version" -d 'Print the version'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and not __fish_seen_subcommand_from run record info cat convert filter reindex export import check recover status leds upload ctl offload completions man version help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and __fish_seen_subcommand_from export" -f -a "csv" -d 'One topic of any bag (ROS 1 .bag, .mcap, rosbag2 directory) as CSV: `log_time`, then the message\'s scalars by path, the header stamp first (or the `--fields` named)'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and __fish_seen_subcommand_from export" -f -a "candump" -d 'CAN topics (can_msgs/msg/Frame, ros2_socketcan_msgs/msg/FdFrame) as a `candump -L` log, merged by receive time: what canplayer, SavvyCAN, python-can and cantools read'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and __fish_seen_subcommand_from export" -f -a "pcap" -d 'UDP packet topics (edgerec_msgs/msg/Packet) as a pcap file (Ethernet/IPv4/UDP with the receive times) for Wireshark, VeloView and Ouster Studio'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and __fish_seen_subcommand_from export" -f -a "video" -d 'A video topic (foxglove_msgs/msg/CompressedVideo, H.265) as a playable file, without re-encoding: .mp4, .mov or .mkv timed by the capture timestamps, or .h265/.hevc (the access units, Annex B)'
complete -c edgerec -n "__fish_edgerec_using_subcommand help; and __fish_seen_subcommand_from import" -f -a "candump" -d 'A `candump -L` log as a new bag directory: /can/<interface> (can_msgs/msg/Frame) and /can/<interface>/fd (ros2_socketcan_msgs/msg/FdFrame), as edgerec records them'
