#!/usr/bin/perl
# md_filter.pl FILE: prints FILE, a GitHub-flavoured Markdown page of the course, rewritten in
# Doxygen's dialect. Doxygen runs it on every .md it reads (FILTER_PATTERNS in Doxyfile.in),
# so the same README.md reads well on GitHub and on the site.
#
#   GitHub                                   site
#   # 02 · Title                    ->       # 02 · Title {#ch02}         (page label)
#   $x^2$                           ->       \f$x^2\f$                     (inline formula)
#   ```math ... ```                 ->       \f[ ... \f]                   (display formula)
#   ![caption](../../plots/a.png)   ->       \image html a.png "caption"   (copied from plots/)
#   ![c](../../docs/diagrams/b.svg) ->       \image html b.svg "c"         (rendered by dot)
#   <!-- snippet: main.cpp step -->  ->      \snippet{lineno} chapters/NN_x/main.cpp step
#   [t](../03_x/README.md)          ->       [t](@ref ch03)
#   [t](../../common/attn/a.hpp)    ->       [t](@ref a.hpp)   (also common/course/)
#   [t](../../README.md)            ->       [t](@ref index)
#   [t](docs/glossary.md)           ->       [t](@ref glossary)            (pages of docs/)
#   [t](docs/sources.md#note-001)   ->       [t](@ref note-001)            (their sections)
#
# Code blocks and `code spans` pass through untouched. Only perl-base (Essential on Debian).
use strict;
use warnings;

# md_filter.pl --check FILE...: runs the filter over every page and fails on the first that it
# refuses. The `docs` target runs this before Doxygen, because Doxygen ignores a filter's exit
# status and would publish the page cut short where the filter stopped.
if (@ARGV && $ARGV[0] eq '--check') {
  shift @ARGV;
  die "usage: md_filter.pl --check FILE...\n" unless @ARGV;
  for my $page (@ARGV) {
    open(my $saved, '>&', \*STDOUT) or die "md_filter.pl: cannot dup stdout: $!\n";
    open(STDOUT, '>', '/dev/null') or die "md_filter.pl: cannot open /dev/null: $!\n";
    my $status = system($^X, $0, $page);
    open(STDOUT, '>&', $saved) or die "md_filter.pl: cannot restore stdout: $!\n";
    exit 1 if $status != 0;
  }
  exit 0;
}

my $path = shift @ARGV or die "usage: md_filter.pl FILE | --check FILE...\n";
open(my $in, '<:raw', $path) or die "md_filter.pl: cannot read $path: $!\n";

# The folder of a chapter page, "chapters/02_attention_by_hand", for its snippets and label.
my ($chapter_dir, $chapter_no) = $path =~ m{(chapters/((\d\d)_[A-Za-z0-9_]+))/README\.md$}
  ? ($1, $3) : (undef, undef);
# A page of docs/ ("docs/glossary.md") is labelled by its file name: @ref glossary.
my ($docs_page) = $path =~ m{(?:^|/)docs/([a-z_]+)\.md$};

my $fence = '';        # the fence that opened the current code block ('' outside one)
my $math = 0;          # inside a ```math block
my $titled = 0;        # the first heading has been labelled

sub link_target {
  my ($target) = @_;
  return '@ref ch' . $1 if $target =~ m{(?:^|/)(?:chapters/)?(\d\d)_[A-Za-z0-9_]+/README\.md$}
    && $target !~ m{^https?:};
  return '@ref index' if $target =~ m{^(?:\.\./)*README\.md$};
  return '@ref ' . $1 if $target =~ m{(?:^|/)common/(?:attn|course)/([A-Za-z0-9_]+\.hpp)$};
  # A section of a page of docs/: its heading carries GitHub's anchor as its label (below).
  return '@ref ' . $1 if $target =~ m{^(?:(?:\.\./)*docs/)?[a-z_]+\.md#([a-z0-9-]+)$};
  return '@ref ' . $1 if $target =~ m{(?:^|/)docs/([a-z_]+)\.md$} || $target =~ m{^([a-z_]+)\.md$};
  return $target;
}

# Rewrites the inline parts of one line that is not inside a code block.
sub inline {
  my ($line) = @_;
  # Split off `code spans` so nothing inside them is touched.
  my @parts = split /(`+[^`]*`+)/, $line;
  for my $part (@parts) {
    next if $part =~ /^`/;
    # $...$ with no space just inside the dollars (GitHub's rule), not $$, not \$.
    $part =~ s{(?<![\\\$\w])\$(?!\s)([^\$\n]+?)(?<!\s)\$(?![\$\w])}{\\f\$$1\\f\$}g;
    $part =~ s{\[([^\]]*)\]\(([^)\s]+)\)}{'[' . $1 . '](' . link_target($2) . ')'}ge;
  }
  return join '', @parts;
}

while (my $line = <$in>) {
  if ($fence ne '') {                                   # inside a fenced block
    if ($line =~ /^\s*\Q$fence\E\s*$/) {
      print $math ? "\\f]\n" : $line;
      $fence = '';
      $math = 0;
    } else {
      print $line;
    }
    next;
  }
  if ($line =~ /^\s*(```+|~~~+)\s*(\w*)/) {             # a fence opens
    $fence = $1;
    if ($2 eq 'math') {
      $math = 1;
      print "\\f[\n";
    } else {
      print $line;
    }
    next;
  }
  if ($line =~ /^#+\s.*(?<![\\\w])\$(?!\s)[^\$]+(?<!\s)\$/) {  # Doxygen cannot typeset a heading
    die "md_filter.pl: $path:$.: no \$formula\$ in a heading (Doxygen cannot typeset one there); "
      . "write it in plain text: $line";
  }
  if (!$titled && $line =~ /^#\s+(.*?)\s*$/) {          # the page title gets its label
    $titled = 1;
    my $title = inline($1);
    print defined $chapter_no ? "# $title {#ch$chapter_no}\n"
        : defined $docs_page ? "# $title {#$docs_page}\n" : "# $title\n";
    next;
  }
  # A figure of plots/ (or its copy in docs/figures/, which the README uses so that GitHub shows
  # it): the site copies the file from plots/, where the chapters drew it. A diagram of
  # docs/diagrams/: the site takes the .svg that dot rendered from its .dot into the build
  # (IMAGE_PATH), not the copy committed beside the source for GitHub.
  if ($line =~ /^\s*!\[([^\]]*)\]\((?:[^)]*\/)?(?:(?:plots|docs\/figures)\/([A-Za-z0-9_.-]+\.png)|docs\/diagrams\/([A-Za-z0-9_.-]+\.svg))\)\s*$/) {
    my ($caption, $file) = ($1, $2 // $3);
    $caption =~ s/"/\\"/g;
    print "\\image html $file \"" . inline($caption) . "\"\n";
    next;
  }
  # A section of a page of docs/ gets the anchor GitHub gives its heading ("## Note 001" ->
  # note-001) as its label, so [t](docs/sources.md#note-001) lands there on both.
  if (defined $docs_page && $line =~ /^(##+)\s+(.*?)\s*$/) {
    my ($hashes, $heading) = ($1, $2);
    (my $anchor = lc $heading) =~ s/[^a-z0-9 _-]//g;
    $anchor =~ s/ /-/g;
    print "$hashes " . inline($heading) . " {#$anchor}\n";
    next;
  }
  if ($line =~ /^\s*<!--\s*snippet:\s*(\S+)\s+(\S+)\s*-->\s*$/) {
    my ($file, $name) = ($1, $2);
    die "md_filter.pl: $path: snippets are only for chapter pages\n" unless defined $chapter_dir;
    print "\\snippet{lineno} $chapter_dir/$file $name\n";
    next;
  }
  # A collapsed answer: Doxygen 1.9 turns a bare <details> into a box per paragraph, so the
  # tags pass through as raw HTML and the Markdown between them is rendered as usual.
  # The line keeps its indentation, so an answer inside a numbered exercise stays in its item
  # and the list keeps counting.
  if ($line =~ /^(\s*)<details>\s*<summary>(.*)<\/summary>\s*$/) {
    print "$1\\htmlonly[block]<details><summary>" . $2 . "</summary>\\endhtmlonly\n";
    next;
  }
  if ($line =~ /^(\s*)<\/details>\s*$/) {
    print "$1\\htmlonly[block]</details>\\endhtmlonly\n";
    next;
  }
  if ($line =~ /(?:^|\s)(\*\*|__)\$/) {  # Doxygen does not embolden text that opens with a formula
    die "md_filter.pl: $path:$.: bold text may not start with a \$formula\$ (Doxygen then prints "
      . "the asterisks); start it with a word: $line";
  }
  if ($line =~ /\*\*[^*\s][^*]*(?<![\\])\$[^*]*\*\*/) {  # nor one with a formula inside
    die "md_filter.pl: $path:$.: bold text may not hold a \$formula\$ (Doxygen then prints the "
      . "asterisks); write the formula outside the bold words: $line";
  }
  my $out = inline($line);
  # A $ left over (not \f$, not \$, not in a code span) is half a formula: GitHub would join
  # it with the next line's, Doxygen would print TeX. Inline formulas stay on one line.
  (my $bare = $out) =~ s/`+[^`]*`+//g;
  if ($bare =~ /(?<!\\f)(?<!\\)\$/) {
    die "md_filter.pl: $path:$.: a \$ without its partner on this line "
      . "(keep each \$formula\$ on one line; write \\\$ for a dollar sign): $line";
  }
  print $out;
}
close $in;
