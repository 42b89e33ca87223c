#!/usr/bin/env bash
# The container image accelml's tests run cases in, built once and cached outside the checkout
# (like the Horovod wheel), with Charliecloud to run it:
#
#   make/build-container-image.sh VENV     # prints the image's path on its last line
#
# The image is a directory: Debian bookworm (minbase, its python3 3.11 and libopenmpi3, which the
# venv's Horovod links) from Debian's
# registry through mmdebstrap, plus accelml's run-time libraries from PyPI in
# /usr/local/lib/python3.11/dist-packages at OTHER versions than the venv's (numpy 2.3,
# scikit-learn 1.8, scipy 1.16), so that the tests see both a container whose libraries are the
# host's (the venv bound in) and one whose libraries are its own. Charliecloud's ch-run
# (Debian's charliecloud-runtime) and mmdebstrap are installed when missing (root on Debian).
#
# The cache is $ACCELML_IMAGE_CACHE (default ~/.cache/accelml/images), one folder per recipe
# (a hash of the suite, packages and libraries); a second run finds it and does nothing. Exit 3: cannot build here
# (not root, not Debian), with the reason on stdout; the container tests then skip.
set -euo pipefail

venv=${1:?usage: build-container-image.sh VENV}
python="$venv/bin/python"
cache_root=${ACCELML_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/accelml/images}
suite=bookworm
debian_packages=python3,libopenmpi3
# Libraries of the image (pip names and ranges): accelml's run-case imports, older than the venv's.
libraries=("numpy>=2.3,<2.4" "scipy>=1.16,<1.17" "scikit-learn>=1.8,<1.9" "joblib" "threadpoolctl"
           "dask[distributed]>=2025.1,<2026" "psutil" "pyyaml")
# The image's name changes with what goes into it (not with edits to the rest of this script).
recipe=$(echo "$suite minbase $debian_packages ${libraries[*]}" | sha256sum | cut -c1-12)
image="$cache_root/$suite-py311-$recipe"

fail() { echo "container image: step '$1' failed: $2" >&2; exit 1; }

if [ -f "$image/.accelml-image-ok" ] && command -v ch-run >/dev/null; then
  echo "$image"
  exit 0
fi
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9   # one build at a time (two test sessions starting at once wait for the first)
if [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ]; then
  echo "cannot build the container image here (needs root on Debian for mmdebstrap and charliecloud-runtime)"
  exit 3
fi
if ! command -v ch-run >/dev/null || ! command -v mmdebstrap >/dev/null; then
  echo "installing Debian's charliecloud-runtime and mmdebstrap"
  bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" charliecloud-runtime mmdebstrap \
    || fail "install charliecloud-runtime mmdebstrap" "apt-get could not install them"
fi
if [ -f "$image/.accelml-image-ok" ]; then echo "$image"; exit 0; fi

start=$(date +%s)
work="$cache_root/.building-$recipe-$$"
trap 'rm -rf "$work"' EXIT
echo "building the test container image (Debian bookworm + python3 + numpy/scipy/scikit-learn/dask) in $image"
mmdebstrap --quiet --variant=minbase --include="$debian_packages" "$suite" "$work" >/dev/null 2>"$cache_root/.mmdebstrap.log" \
  || { tail -n 20 "$cache_root/.mmdebstrap.log" >&2; fail "mmdebstrap" "could not bootstrap Debian bookworm (log above)"; }
debian_done=$(date +%s)
site="$work/usr/local/lib/python3.11/dist-packages"
mkdir -p "$site"
"$python" -m pip install --quiet --target "$site" --only-binary=:all: --python-version 3.11 \
    --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --no-warn-script-location "${libraries[@]}" 2>"$cache_root/.pip.log" \
  || { tail -n 20 "$cache_root/.pip.log" >&2; fail "pip install into the image" "pip could not install ${libraries[*]}"; }
rm -rf "$work/var/cache/apt/archives"/*.deb "$work/var/lib/apt/lists"/* "$site/bin"
USER=${USER:-$(id -un)} ch-run "$work" -- python3 -c 'import numpy, scipy, sklearn, distributed' \
  || fail "check the image" "its python3 cannot import numpy, scipy, sklearn and distributed"
touch "$work/.accelml-image-ok"
rm -rf "$image"
mv "$work" "$image"
trap - EXIT
# images of earlier recipes of this script are not used any more
find "$cache_root" -maxdepth 1 -name "$suite-py311-*" ! -name "$(basename "$image")" -exec rm -rf {} +
end=$(date +%s)
echo "built $image in $(( end - start )) s (Debian $(( debian_done - start )) s, Python libraries $(( end - debian_done )) s), $(du -sm "$image" | cut -f1) MB"
echo "$image"
