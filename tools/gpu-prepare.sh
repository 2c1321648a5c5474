#!/usr/bin/env bash
# Run here, before sending the tree to a GPU machine that cannot reach a
# package index: downloads the Debian packages tools/gpu-check.sh needs
# there and the image may lack (pkgconf, hwloc, Criterion and the
# libraries Criterion links) into .gpu-deps/, which git ignores and the
# device tool carries.  Safe to run again: it only fetches what is
# missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
    pkgconf pkgconf-bin libpkgconf3
    libhwloc15 libhwloc-dev libnuma1 libudev1 libltdl7
    libcriterion3 libcriterion-dev libnanomsg5 libgit2-1.5
    libhttp-parser2.9 libmbedtls14 libmbedx509-1 libmbedcrypto7 libssh2-1
    libffi8 libpcre2-8-0 libgssapi-krb5-2 libkrb5-3 libk5crypto3
    libkrb5support0 libkeyutils1 libcom-err2
)
mkdir -p .gpu-deps
cd .gpu-deps
missing=()
for p in "${packages[@]}"; do
    compgen -G "${p}_*.deb" > /dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    apt-get download "${missing[@]}"
fi
echo "gpu-prepare: $(ls ./*.deb | wc -l) packages in .gpu-deps," \
     "$(du -sh . | cut -f1)"
