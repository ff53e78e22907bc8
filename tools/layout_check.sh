#!/bin/sh
# The layout rules the compiler cannot see (docs/architecture.md, first section), checked on every
# build and by ctest: SQLiteCpp's, SQLite's and libpq's headers are installed where any target
# could include them, and a static library's private dependencies still link, so only this keeps
#   - storage/ the one door: no file of engine/, tools/ or proto/ includes a backend's header
#     (storage/sqlite/, storage/postgres/, storage/seed001/), SQLiteCpp, SQLite or libpq, or
#     holds SQL;
#   - proto/ pure: it includes proto/, the standard library, Boost.JSON, Boost.URL and OpenSSL;
#   - engine/ without include loops: each folder, and each file at engine/'s root, is a node,
#     and no node includes one that includes it back, however long the loop.
# Prints each breach and exits 1 if there is one.
root=${1:-.}
cd "$root" || exit 2
status=0

breach() {
  echo "layout: $1" >&2
  status=1
}

# grep's output over the C++ files of the given folders (no output when nothing matches).
search() {
  pattern=$1
  shift
  find "$@" \( -name '*.hpp' -o -name '*.cpp' \) -exec grep -HnE "$pattern" {} +
}

[ -d engine ] && [ -d tools ] && [ -d proto ] || {
  echo "layout: $root is not Surge's source tree" >&2
  exit 2
}

reach=$(search '#include *[<"](storage/(sqlite|postgres|seed001)/|storage/queue_backend\.hpp|SQLiteCpp/|sqlite3\.h|libpq-fe\.h|postgresql/)' \
  engine tools proto)
[ -z "$reach" ] || breach "only storage/ reaches a storage backend, but $reach"
sql=$(search '"[^"]*(SELECT |INSERT INTO |UPDATE [a-z_]+ SET |DELETE FROM )' engine tools proto)
[ -z "$sql" ] || breach "SQL belongs to storage/, but $sql"

# The standard library's headers have neither a folder nor a dot.
impure=$(search '#include' proto | sed -nE 's/^([^:]+):[0-9]+:#include *[<"]([^>"]+)[>"].*/\1 \2/p' |
  while read -r file header; do
    case "$header" in
      proto/* | boost/json/* | boost/json.hpp | boost/url/* | openssl/*) ;;
      */* | *.*) echo "$file includes $header" ;;
    esac
  done)
[ -z "$impure" ] || breach "proto/ is pure, but $impure"

# engine/ as a graph: a file in a folder is that folder's node; a file at the root is its
# header's (drain.cpp is drain.hpp). tsort finds any loop.
edges=$(search '#include "engine/' engine |
  sed -nE 's|^engine/([^:]+):[0-9]+:#include "engine/([^"]+)".*|\1 \2|p' |
  while read -r from to; do
    case "$from" in
      */*) from=${from%%/*} ;;
      *.cpp) from=${from%.cpp}.hpp ;;
    esac
    case "$to" in */*) to=${to%%/*} ;; esac
    [ "$from" = "$to" ] || echo "$from $to"
  done | sort -u)
if ! loops=$(echo "$edges" | tsort 2>&1 >/dev/null) || [ -n "$loops" ]; then
  breach "engine/ includes in a loop: $loops"
fi

exit $status
