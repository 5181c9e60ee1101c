#!/usr/bin/env bash
# Install everything cardbench and its tests need on a fresh Debian machine (root), then the package.
# Idempotent: re-running it only checks. Set CARDBENCH_SKIP_APT=1 to skip the system packages.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  fio f3 hdparm ioping          # peers measured side by side (bench/, tests)
  fuse3 libfuse3-3              # emulated cards (FUSE + loop device)
  e2fsprogs util-linux kmod     # mkfs.ext4, losetup, lsblk
  exfatprogs exfat-fuse         # exFAT cards through a FUSE driver (brings libfuse2 beside libfuse3)
  dosfstools                    # mkfs.vfat: FAT cards as people have them
  sg3-utils                     # sg_sat_identify: CF cards behind SAT readers
  tmux                          # the 80-column output tests run commands in a real terminal
  postgresql                    # the shared-store tests start a throwaway server
  chromium                      # the HTML report is rendered headless in a test
  qemu-system-x86               # tests/vm: a booted kernel with emulated SD, USB and ATA hardware
  linux-image-amd64             # tests/vm: the packaged kernel the guest boots, with its modules
  busybox-static                # tests/vm: the guest's initramfs (mounts the host root over 9p)
)

if [ "${CARDBENCH_SKIP_APT:-0}" != 1 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    missing=()
    for p in "${APT_PACKAGES[@]}"; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
      echo "setup: installing ${missing[*]}" >&2
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
  else
    echo "setup: not root (or no apt-get): skipping system packages ${APT_PACKAGES[*]}" >&2
  fi
fi

python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[test]'
