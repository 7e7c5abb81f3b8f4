"""The virtual board: a process that speaks the device side of adb over TCP (127.0.0.1),
runs shell commands in a bubblewrap sandbox rooted at the board's own folder, and
executes `.pte` files with ExecuTorch's host runtime; in its bootloader it speaks fastboot over
TCP instead (`bootloader.py`, `fastboot.py`, `images.py`). Every result it produces is marked
virtual (`ro.hil.virtual=1`)."""
