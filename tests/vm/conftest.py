"""The VM tier (issue 24): cardbench on a booted Debian kernel with emulated SD, USB and ATA
hardware under the kernel's own drivers. See vmharness.py for the design.

Where it cannot run (no QEMU, no kernel image, no busybox, not root) every test skips with a
reason naming what is missing; with ``CI=true`` that is a failure instead, so CI cannot pass
without running it. Each test module boots one guest (module-scoped fixture) and runs several
checks on it; QEMU is killed and its temporary files removed by the fixture's finalizer, also
when a test fails.
"""
