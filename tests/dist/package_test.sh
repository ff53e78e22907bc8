#!/usr/bin/env bash
# The Debian package of tools/dist/CMakeLists.txt, built by cpack from the build tree this test
# runs in (into a temp dir, so a release `cpack --preset deb` is not disturbed), then checked
# the way Debian would: dpkg-deb for what ships, lintian for policy.
#   package_test.sh CPACK BUILD_DIR
set -euo pipefail
cpack=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for tool in dpkg-deb dpkg-shlibdeps lintian; do
  # Missing, the checks below would pass vacuously: fail instead (tools/dev.sh installs them).
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (Debian: lintian, dpkg-dev)" >&2; exit 1; }
done
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

if ! "$cpack" --config "$build/CPackConfig.cmake" -B "$tmp" >"$tmp/cpack.log" 2>&1; then
  cat "$tmp/cpack.log" >&2
  echo "FAIL: cpack" >&2
  exit 1
fi
debs=("$tmp"/surge_*.deb)
deb=${debs[0]}
[[ -f $deb ]] || { echo "FAIL: no surge_*.deb in $tmp" >&2; exit 1; }
dpkg-deb -x "$deb" "$tmp/root"
dpkg-deb -e "$deb" "$tmp/control"

# copyright: present, machine-readable (DEP-5).
copyright=$tmp/root/usr/share/doc/surge/copyright
if [[ ! -f $copyright ]]; then
  fail "no /usr/share/doc/surge/copyright"
elif ! head -1 "$copyright" | grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/'; then
  fail "copyright is not in the DEP-5 format"
fi

# Every file under /etc is a conffile, and the config examples are there.
for f in /etc/surge/drain.toml.example /etc/surge/prune.toml.example; do
  [[ -f $tmp/root$f ]] || fail "$f not shipped"
done
(cd "$tmp/root" && find etc -type f | sed 's|^|/|' | sort) >"$tmp/etc-files"
sort "$tmp/control/conffiles" 2>/dev/null >"$tmp/conffiles" || true
diff -u "$tmp/etc-files" "$tmp/conffiles" >&2 || fail "conffiles does not list exactly the files in /etc"

# Maintainer scripts: prerm exists (stops the instances); all are valid sh.
[[ -x $tmp/control/prerm ]] || fail "no executable prerm"
for s in preinst postinst prerm postrm; do
  [[ ! -e $tmp/control/$s ]] || sh -n "$tmp/control/$s" || fail "$s: sh syntax error"
done

# Relative links in the installed Markdown resolve in the installed tree (README.md -> docs/).
doc=$tmp/root/usr/share/doc/surge
while IFS= read -r md; do
  { grep -o '\]([^)#]*' "$md" || true; } | sed 's/^](//' | { grep -v -E '^[a-z]+:|^$' || true; } |
    sort -u | while IFS= read -r link; do
      [[ -e $(dirname "$md")/$link ]] || echo "FAIL: ${md#"$doc"/} links to missing $link" >&2
    done
done < <(find "$doc" -name '*.md') 2>"$tmp/links"
if [[ -s $tmp/links ]]; then cat "$tmp/links" >&2; fail "broken documentation links"; fi
# The units' Documentation= pages are installed.
for doc_url in $(grep -h '^Documentation=file://' "$tmp"/root/usr/lib/systemd/system/*); do
  [[ -f $tmp/root${doc_url#Documentation=file://} ]] || fail "unit documentation ${doc_url} missing"
done

# lintian: no error. Its warnings are printed for the log; the accepted ones and why are in
# docs/operations.md ("From package to a running, alerting service").
lintian --fail-on none --tag-display-limit 0 "$deb" >"$tmp/lintian.log" 2>&1 || true
cat "$tmp/lintian.log"
if grep -q '^E: ' "$tmp/lintian.log"; then fail "lintian reports errors"; fi

((failures == 0)) || { echo "$failures check(s) failed" >&2; exit 1; }
echo "package checks passed: $(basename "$deb")"
