#!/usr/bin/perl
# How long each chapter page's core is: the words a learner reads before the page's first
# "## Exercises" or "## Go deeper" heading, which is where the lesson ends and the practice and
# the detail (rounding, fixtures, the tests' tolerances) begin. A page leads with its lesson when
# that core is at most about 1,500 words, the length of a short essay; figures, tables and the
# excerpts' prose count, code does not (fenced blocks, display formulas in ```math fences,
# <!-- --> markers), nor a link's target.
#
#   perl tests/repository/page_cores.pl [--limit N] chapters/*/README.md
#
# Prints each page's count; exits 1 naming every page over the limit (1,500 unless told).
use strict;
use warnings;

my $limit = 1500;
if (@ARGV >= 2 && $ARGV[0] eq '--limit') {
  shift @ARGV;
  $limit = shift @ARGV;
}
die "usage: page_cores.pl [--limit N] PAGE.md...\n" unless @ARGV && $limit =~ /^\d+$/;

my @long;
for my $page (@ARGV) {
  open(my $in, '<', $page) or die "page_cores.pl: cannot read $page: $!\n";
  my ($words, $fenced, $comment) = (0, 0, 0);
  while (my $line = <$in>) {
    if ($line =~ /^\s*```/) { $fenced = !$fenced; next; }
    next if $fenced;
    last if $line =~ /^## (Exercises|Go deeper)\b/;
    # An HTML comment (a snippet marker) says nothing to the reader, over one line or several.
    $line =~ s/<!--.*?-->//g;
    if ($comment) {
      next unless $line =~ s/^.*?-->//;
      $comment = 0;
    }
    $comment = 1 if $line =~ s/<!--.*$//;
    $line =~ s/\]\([^)\s]*\)/]/g;    # a link's or a figure's target: the reader sees its text
    $words += () = $line =~ /\S*[[:alnum:]]\S*/g;
  }
  close($in);
  printf "%5d  %s\n", $words, $page;
  push @long, "$page ($words words)" if $words > $limit;
}
if (@long) {
  print "page_cores.pl: over $limit words before the first \"## Exercises\" or \"## Go deeper\": "
      . join(', ', @long) . "\n";
  exit 1;
}
print "page_cores.pl: every core is at most $limit words\n";
exit 0;
