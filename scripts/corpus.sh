#!/usr/bin/env bash
# Real-world Clojure test corpus from Debian's packaged Clojure libraries.
#
#   scripts/corpus.sh DIR          install (if missing) the pinned Debian packages and
#                                  extract their .clj/.cljc/.cljs/.edn sources into
#                                  DIR/<jar-name-without-version>/...
#   scripts/corpus.sh --classpath  print the colon-joined jar classpath that loads every
#                                  corpus library and its dependencies
#
# Idempotent (each DIR/<name> is replaced as a whole, and only when the jars changed since
# the last extraction: DIR.stamp; DIR.lock serialises runs), silent on success, non-zero
# exit with a message on stderr on failure. See tests/clojure/README.md.
set -euo pipefail

JAVA_DIR=/usr/share/java

# Corpus: "debian-package:jar-in-/usr/share/java". The jar name minus ".jar" and minus a
# trailing "-<version>" names the corpus subdirectory. Order is irrelevant for the corpus
# but is the classpath order.
CORPUS=(
  clojure:clojure-1.11.jar
  libspec-alpha-clojure:spec.alpha.jar
  libcore-specs-alpha-clojure:core.specs.alpha.jar
  libcore-async-clojure:core.async.jar
  libtools-analyzer-clojure:tools.analyzer.jar
  libtools-analyzer-jvm-clojure:tools.analyzer.jvm.jar
  libtools-reader-clojure:tools.reader.jar
  libcore-cache-clojure:core.cache.jar
  libcore-memoize-clojure:core.memoize.jar
  libdata-priority-map-clojure:data.priority-map.jar
  libring-core-clojure:ring-core.jar
  libring-codec-clojure:ring-codec.jar
  libcrypto-random-clojure:crypto-random.jar
  libcrypto-equality-clojure:crypto-equality.jar
  libinstaparse-clojure:instaparse.jar
  libcompojure-clojure:compojure.jar
  libclout-clojure:clout.jar
  libtools-macro-clojure:tools.macro.jar
  libclj-time-clojure:clj-time.jar
  libmedley-clojure:medley.jar
  libspecter-clojure:specter.jar
  libriddley-clojure:riddley.jar
  libdata-json-clojure:data.json.jar
  libtools-cli-clojure:tools.cli.jar
  libcore-match-clojure:core.match.jar
  libtools-logging-clojure:tools.logging.jar
  libhiccup-clojure:hiccup.jar
  libdata-xml-clojure:data.xml.jar
  libtest-check-clojure:test.check.jar
  libmath-combinatorics-clojure:math.combinatorics.jar
  libjava-jdbc-clojure:java.jdbc.jar
  libhoneysql-clojure:honeysql.jar
  libencore-clojure:encore.jar
  libtruss-clojure:truss.jar
)

# Java dependencies that are needed on the classpath but are not part of the corpus.
DEPS=(
  libasm-java:asm.jar                            # tools.analyzer.jvm (org.objectweb.asm)
  libjoda-time-java:joda-time.jar                # clj-time
  libcommons-codec-java:commons-codec.jar        # ring-codec, crypto-random
  libcommons-io-java:commons-io.jar              # ring-core
  libcommons-fileupload-java:commons-fileupload.jar  # ring-core multipart
  libservlet-api-java:servlet-api.jar            # ring.middleware.multipart-params
)

# Command-line tools the script itself needs: "command:debian-package".
TOOLS=(unzip:unzip)

die() {
  echo "corpus.sh: error: $*" >&2
  exit 1
}

usage() {
  echo "usage: scripts/corpus.sh DIR | --classpath" >&2
  exit 2
}

pkg_installed() {
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" = installed ]
}

# Install (with apt-get) whatever of the pinned packages is missing; no-op otherwise.
ensure_packages() {
  local missing=() entry
  for entry in "${CORPUS[@]}" "${DEPS[@]}"; do
    pkg_installed "${entry%%:*}" || missing+=("${entry%%:*}")
  done
  for entry in "${TOOLS[@]}"; do
    command -v "${entry%%:*}" >/dev/null 2>&1 || missing+=("${entry#*:}")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0

  command -v apt-get >/dev/null 2>&1 || die "missing packages (${missing[*]}) and no apt-get"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "missing packages (${missing[*]}); run as root to install them"
    sudo=(sudo)
  fi
  local log
  log=$(mktemp)
  if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    die "apt-get update failed"
  fi
  if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    die "apt-get install failed for: ${missing[*]}"
  fi
  rm -f "$log"
  for entry in "${CORPUS[@]}" "${DEPS[@]}"; do
    pkg_installed "${entry%%:*}" || die "package ${entry%%:*} still not installed"
  done
}

jar_path() {
  local p="$JAVA_DIR/$1"
  [ -f "$p" ] || die "$p not found (package $2 installed but jar missing?)"
  printf '%s\n' "$p"
}

# clojure-1.11.jar -> clojure, core.async.jar -> core.async, data.xml-0.2.0~alpha6.jar -> data.xml
dir_name() {
  local base="${1%.jar}"
  printf '%s\n' "$base" | sed -E 's/-[0-9][^/]*$//'
}

print_classpath() {
  local entry cp=()
  for entry in "${CORPUS[@]}" "${DEPS[@]}"; do
    cp+=("$(jar_path "${entry#*:}" "${entry%%:*}")")
  done
  (IFS=:; printf '%s\n' "${cp[*]}")
}

# The jars the corpus comes from, by path, size and mtime: unchanged jars, unchanged corpus.
corpus_stamp() {
  local entry
  for entry in "${CORPUS[@]}"; do
    stat -c '%n %s %Y' "$(jar_path "${entry#*:}" "${entry%%:*}")"
  done
}

extract_corpus() {
  local dir="$1" entry jar name tmp stamp
  mkdir -p "$dir" || die "cannot create $dir"
  dir=$(cd "$dir" && pwd)
  # One extraction at a time (tests running side by side each ask for the corpus), and none
  # when the corpus already comes from these jars: re-extracting under a reader's feet makes
  # its files vanish for a moment. The lock and the stamp sit beside DIR, not in it, so they
  # are no part of the tree.
  exec 9>"$dir.lock" || die "cannot create $dir.lock"
  flock 9 || die "cannot lock $dir.lock"
  stamp=$(corpus_stamp)
  if [ -f "$dir.stamp" ] && [ "$(cat "$dir.stamp")" = "$stamp" ]; then
    return 0
  fi
  tmp=$(mktemp -d "$dir/.corpus-tmp.XXXXXX") || die "cannot create a temporary directory in $dir"
  # Expanded now: `tmp` is local and gone by the time the shell exits.
  trap "rm -rf '$tmp'" EXIT
  local seen=" "
  for entry in "${CORPUS[@]}"; do
    jar=$(jar_path "${entry#*:}" "${entry%%:*}")
    name=$(dir_name "${entry#*:}")
    case "$seen" in *" $name "*) die "two corpus jars map to the directory '$name'";; esac
    seen="$seen$name "
    local members=()
    mapfile -t members < <(unzip -Z1 "$jar" | grep -E '\.(clj|cljc|cljs|edn)$' | grep -v '^META-INF/' || true)
    [ "${#members[@]}" -gt 0 ] || die "$jar contains no Clojure sources"
    mkdir -p "$tmp/$name"
    # -W: '*' in a member name does not match '/'; names are matched literally otherwise.
    unzip -qq -o -W "$jar" "${members[@]}" -d "$tmp/$name" \
      || die "extracting sources from $jar failed"
  done
  for entry in "${CORPUS[@]}"; do
    name=$(dir_name "${entry#*:}")
    rm -rf "${dir:?}/$name"
    mv "$tmp/$name" "$dir/$name"
  done
  rm -rf "$tmp"
  trap - EXIT
  printf '%s\n' "$stamp" > "$dir.stamp"
}

[ "$#" -eq 1 ] || usage
case "$1" in
  --classpath)
    ensure_packages
    print_classpath
    ;;
  -h|--help)
    usage
    ;;
  -*)
    usage
    ;;
  *)
    ensure_packages
    extract_corpus "$1"
    ;;
esac
