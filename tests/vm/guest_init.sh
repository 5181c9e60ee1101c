#!/bin/sh
# The guest's first process after the initramfs handed over the host's root (read-only, 9p):
# tmpfs where programs write, the drivers of the emulated hardware, then the command agent.
arg() { sed -n "s/.*cardbench\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
for d in /tmp /run /var/tmp /mnt /media /dev/shm; do mount -t tmpfs -o mode=1777 tmpfs "$d" 2>/dev/null; done
# the checkout may lie under one of those (CI clones into /tmp): it comes over 9p of its own
CO=$(arg checkout)
if [ ! -e "$CO/tests/vm/guest_agent.py" ]; then
  mkdir -p "$CO" && mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=524288 checkout "$CO" \
    || echo "guest: cannot mount the checkout $CO over 9p"
fi
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mkdir -p /tmp/home
export HOME=/tmp/home PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
PY=$(arg python)
export PATH="$(dirname "$PY"):$PATH"
# bytecode is written to the guest's tmpfs (the host root is read-only) and read back by every
# later command: without it each `python3 -m cardbench` compiled its imports again under TCG
export PYTHONPATH="$(arg checkout)/src" PYTHONPYCACHEPREFIX=/tmp/pycache
for m in $(arg modules | tr , ' '); do modprobe -q "$m" || echo "guest: modprobe $m failed"; done
hostname cardbench-vm
exec "$PY" "$CO/tests/vm/guest_agent.py"
