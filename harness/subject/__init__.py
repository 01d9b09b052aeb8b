"""What a commit changes and a side runs: the storage policy and the QEMU binaries."""
