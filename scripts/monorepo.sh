#!/usr/bin/env bash
# A synthetic Clojure monorepo built from the Debian corpus (scripts/corpus.sh).
#
#   scripts/monorepo.sh N OUT [CORPUS]
#
# OUT gets the `clojure` library once (OUT/clojure/...) and N copies of every other corpus
# library: copy K lives in OUT/mK/<library>/mK/<path in the library>, and every namespace the
# non-`clojure` libraries declare is renamed `mK.<namespace>` wherever it is named in that copy
# (ns forms, requires, qualified symbols, keywords with a namespace). So no two files declare the
# same namespace and calls resolve within a copy. Namespaces of the `clojure` library
# (clojure.core, clojure.string, ...) are never renamed; those of contrib libraries that live
# under `clojure.` (clojure.core.async, ...) are, since each copy is its own library.
#
# N = 17 gives about a million lines in about 4,000 files. CORPUS defaults to $FORMDB_CORPUS,
# else target/corpus (extracted when missing). OUT is replaced as a whole. Silent on success.
set -euo pipefail

die() {
  echo "monorepo.sh: error: $*" >&2
  exit 1
}

[ "$#" -ge 2 ] && [ "$#" -le 3 ] || { echo "usage: scripts/monorepo.sh N OUT [CORPUS]" >&2; exit 2; }
copies=$1
out=$2
[[ "$copies" =~ ^[1-9][0-9]*$ ]] || die "N must be a positive number, not '$copies'"
here=$(cd "$(dirname "$0")" && pwd)
corpus=${3:-${FORMDB_CORPUS:-$here/../target/corpus}}
if [ ! -d "$corpus/clojure" ]; then
  "$here/corpus.sh" "$corpus"
fi
[ -d "$corpus/clojure" ] || die "$corpus has no clojure library (run scripts/corpus.sh)"
command -v perl >/dev/null 2>&1 || die "perl is needed"

rm -rf "$out"
mkdir -p "$out"
cp -r "$corpus/clojure" "$out/clojure"

perl -e '
use strict; use warnings;
use File::Find; use File::Path qw(make_path); use File::Basename qw(dirname);
my ($corpus, $out, $copies) = @ARGV;
opendir(my $dh, $corpus) or die "monorepo.sh: error: $corpus: $!\n";
my @libs = sort grep { !/^\./ && $_ ne "clojure" && -d "$corpus/$_" } readdir $dh;
closedir $dh;
my (%files, %declared);
for my $lib (@libs) {
  find({ no_chdir => 1, wanted => sub {
    return unless -f $_;
    my $rel = substr($_, length("$corpus/$lib/"));
    push @{$files{$lib}}, $rel;
    return unless /\.clj[cs]?$/;
    open(my $fh, "<", $_) or die "monorepo.sh: error: $_: $!\n";
    local $/; my $text = <$fh>; close $fh;
    # The first ns form: skip metadata maps and keywords between `ns` and the name.
    if ($text =~ /^\(ns\s+(?:\^(?:\{[^}]*\}|:\S+)\s+)*([A-Za-z][A-Za-z0-9_*+!?\-]*(?:\.[A-Za-z0-9_*+!?\-]+)+)/m) { $declared{$1} = 1 }
  }}, "$corpus/$lib");
}
# Longest first, so that a.b.c is tried before a.b; the boundaries make whole names only.
my $names = join "|", map { quotemeta } sort { length($b) <=> length($a) || $a cmp $b } keys %declared;
my $sym = q{A-Za-z0-9_.*+!?$&%<>='"'"'\-};
my $re = qr/(?<![${sym}\/])($names)(?![${sym}])/;
for my $k (1 .. $copies) {
  my $p = "m$k";
  for my $lib (@libs) {
    for my $rel (@{$files{$lib}}) {
      my $src = "$corpus/$lib/$rel";
      my $dst = "$out/$p/$lib/$p/$rel";
      make_path(dirname($dst));
      open(my $in, "<:raw", $src) or die "monorepo.sh: error: $src: $!\n";
      local $/; my $text = <$in>; close $in;
      $text =~ s/$re/$p.$1/g if $rel =~ /\.(clj[cs]?|edn)$/;
      open(my $o, ">:raw", $dst) or die "monorepo.sh: error: $dst: $!\n";
      print $o $text; close $o;
    }
  }
}
' "$corpus" "$out" "$copies"
