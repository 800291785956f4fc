"""The `mopt` command line: one small module per command, each calling one library function."""
