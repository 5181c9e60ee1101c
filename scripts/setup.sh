#!/usr/bin/env bash
# Install what cardbench needs on a fresh Debian machine (root), then the package. Two sets:
#
#   bash scripts/setup.sh           to run cardbench and its demo (scripts/quickstart.sh)
#   bash scripts/setup.sh --tests   also the test tiers' parts (scripts/test.sh, CI)
#
# The first set changes nothing a person boots with; only --tests installs QEMU and a kernel
# package (linux-image-amd64: on a Debian host that installs or upgrades the kernel it boots).
# Idempotent: re-running it only checks. CARDBENCH_SKIP_APT=1 skips the system packages.
set -euo pipefail
cd "$(dirname "$0")/.."

tests=0
case "${1:-}" in
  "") ;;
  --tests) tests=1 ;;
  *) echo "setup: unknown argument ${1} (use --tests or nothing)" >&2; exit 2 ;;
esac

# to run cardbench, and its demo of emulated cards (loop devices over a FUSE server, ext4)
RUN_PACKAGES=(
  fuse3 libfuse3-3              # emulated cards: the demo's FUSE server
  e2fsprogs                     # mkfs.ext4: the demo's cards
  util-linux mount              # lsblk (devices), losetup and mount (the demo's cards)
)
# the test tiers: peers, other filesystems, stores, the browser, the booted kernel
TEST_PACKAGES=(
  fio f3 hdparm ioping          # peers measured side by side (bench/, tests); fio also --engine fio
  kmod                          # modprobe
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
packages=("${RUN_PACKAGES[@]}")
extra=""
if [ "$tests" = 1 ]; then
  packages+=("${TEST_PACKAGES[@]}")
  extra="[test]"
fi

if [ "${CARDBENCH_SKIP_APT:-0}" != 1 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    missing=()
    for p in "${packages[@]}"; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
      echo "setup: installing ${missing[*]}" >&2
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
  else
    echo "setup: not root (or no apt-get): skipping system packages ${packages[*]}" >&2
  fi
fi

python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e ".${extra}"
