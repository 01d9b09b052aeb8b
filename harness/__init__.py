"""diskbench: continuous benchmarking of virtual-disk IO under QEMU/KVM."""

__version__ = "0.1.0"
