#!/usr/bin/env bash
# Install the Debian libraries Qt needs, only if a Qt library can't find one.
#   scripts/qt-system-deps.sh            # for offscreen/desktop use (make run / make test)
#   scripts/qt-system-deps.sh --xvfb     # also a virtual X server (make screenshots)
set -euo pipefail
venv=${VENV:-.venv}
qt=$(ls -d "$venv"/lib/python*/site-packages/PySide6/Qt 2>/dev/null | head -n1)
[ -n "$qt" ] || { echo "PySide6 is not installed in $venv" >&2; exit 1; }

packages=(libegl1 libgl1 libopengl0 libfontconfig1 libfreetype6 libdbus-1-3 libglib2.0-0 libxkbcommon0
          libxkbcommon-x11-0 libx11-xcb1 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0
          libxcb-xinerama0 libxcb-randr0 libxcb-render-util0 libxcb-image0 libxcb-xkb1 fonts-dejavu-core)
need=0
for lib in "$qt"/lib/libQt6Gui.so.6 "$qt"/lib/libQt6Widgets.so.6 "$qt"/plugins/platforms/libqoffscreen.so \
           "$qt"/plugins/platforms/libqxcb.so; do
  if ldd "$lib" 2>/dev/null | grep -q "not found"; then need=1; fi
done
if [ "${1:-}" = "--xvfb" ]; then
  packages+=(xvfb xauth)
  command -v xvfb-run >/dev/null || need=1
fi
[ "$need" = 1 ] || exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "Installing Qt's system libraries: ${packages[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
else
  echo "Qt needs system libraries that are missing. On Debian/Ubuntu run:" >&2
  echo "  sudo apt-get install ${packages[*]}" >&2
  exit 1
fi
