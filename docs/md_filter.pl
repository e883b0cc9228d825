#!/usr/bin/perl
# md_filter.pl FILE: prints FILE, a GitHub-flavoured Markdown page of the course, rewritten in
# Doxygen's dialect. Doxygen runs it on every .md it reads (FILTER_PATTERNS in Doxyfile.in),
# so the same README.md reads well on GitHub and on the site.
#
#   GitHub                                   site
#   # 02 · Title                    ->       # 02 · Title {#ch02}         (page label)
#   $x^2$                           ->       \f$x^2\f$                     (inline formula)
#   ```math ... ```                 ->       \f[ ... \f]                   (display formula)
#   ![c](../../docs/figures/a.png)  ->       \image html a.png "c"         (copied from plots/)
#   ![c](../../docs/diagrams/b.svg) ->       \image html b.svg "c"         (rendered by dot)
#   <!-- snippet: main.cpp step -->  ->      \snippet{lineno} chapters/NN_x/main.cpp step
#   (or ../../tests/chapters/exercise_NN_solution.cpp answer_NN_k: an exercise's worked answer)
#   ```cpp (the region's copy) ```           (dropped: the site pulls the region itself)
#   <!-- end snippet -->
#   [t](../03_x/README.md)          ->       [t](@ref ch03)
#   [t](../../common/attn/ops/a.hpp) ->      [t](@ref a.hpp)   (also common/course/)
#   [t](../../README.md)            ->       [t](@ref index)
#   [t](docs/glossary.md)           ->       [t](@ref glossary)            (pages of docs/)
#   [t](docs/sources.md#note-001)   ->       [t](@ref note-001)            (their sections)
#
# Code blocks and `code spans` pass through untouched. Only perl-base (Essential on Debian).
#
# A code excerpt is a region of the chapter's main.cpp between two marker lines `// [name]`.
# The page names it in a marker line and, for GitHub (which cannot pull it), holds a copy right
# below, which the filter checks and the site drops:
#
#   <!-- snippet: main.cpp name -->
#   ```cpp
#   the region's lines
#   ```
#   <!-- end snippet -->
#
# The copy is the lines between the markers, as Doxygen's \snippet shows them, except that the
# indentation they all share is removed (a region inside main() would start two or more spaces
# in on GitHub; the site keeps it, beside its line numbers), and a line of only blanks is
# empty. The check compares the copy with exactly that, byte for byte. `md_filter.pl --expand`
# (scripts/update_snippets.sh) rewrites the copies from main.cpp.
use strict;
use warnings;

my $fix_snippets = 'run scripts/update_snippets.sh';

# The lines of the region `name` of the file `source`, as the page's copy holds them (see the
# top), or dies naming the page and the problem. Doxygen's \snippet takes the lines between the
# first two lines holding "[name]" and warns unless there are exactly two; the filter asks for
# exactly two as well, each a comment of its own, so what it copies is what the site shows.
sub snippet_region {
  my ($page, $source, $name) = @_;
  my $where = "md_filter.pl: $page: snippet '$name'";
  open(my $in, '<:raw', $source) or die "$where: cannot read $source: $!\n";
  my @lines = <$in>;
  close $in;
  my @markers = grep { index($lines[$_], "[$name]") >= 0 } 0 .. $#lines;
  if (@markers != 2) {
    die "$where: $source needs exactly two lines holding [$name], the marker lines "
      . "`// [$name]` around the excerpt, and has " . scalar(@markers) . ": fix main.cpp or the "
      . "name in the page's marker, then $fix_snippets\n";
  }
  for my $m (@markers) {
    next if $lines[$m] =~ /^\s*\/\/\s*\[\Q$name\E\]\s*$/;
    die "$where: $source:" . ($m + 1) . " holds [$name] but is not a marker line "
      . "`// [$name]` of its own; make it one, then $fix_snippets\n";
  }
  my @region = @lines[$markers[0] + 1 .. $markers[1] - 1];
  die "$where: the region [$name] of $source is empty\n" unless grep { /\S/ } @region;
  for (@region) {
    $_ .= "\n" unless /\n\z/;
    $_ = "\n" unless /\S/;
  }
  my ($indent) = sort { length $a <=> length $b } map { /^( *)/; $1 } grep { /\S/ } @region;
  s/^\Q$indent\E// for @region;
  return @region;
}

# The copy of a region as the page holds it, fence lines included (no ``` in C++ code, but a
# longer fence if a line ever starts with one), each line indented by $indent.
sub snippet_copy {
  my ($indent, @region) = @_;
  my $fence = '```';
  $fence .= '`' while grep { /^\s*\Q$fence\E/ } @region;
  # Indented as the marker is: inside a list item (an exercise's worked answer) the copy stays
  # part of the item; a blank line stays empty.
  return map { /\S/ ? "$indent$_" : $_ } ("$fence" . "cpp\n", @region, "$fence\n");
}

my $snippet_re = qr/^\s*<!--\s*snippet:\s*(\S+)\s+(\S+)\s*-->\s*$/;
my $end_snippet_re = qr/^\s*<!--\s*end snippet\s*-->\s*$/;
my $fence_re = qr/^\s*(```+|~~~+)\s*(\w*)/;

# The copy below the marker at $lines[$i]: returns the index of its end marker, or -1 when the
# line under the marker does not open a code block (no copy yet). Dies when the end marker is
# missing: without it the page's text after the copy would be taken for part of it.
sub copy_end {
  my ($page, $name, $lines, $i) = @_;
  return -1 unless $i + 1 < @$lines && $lines->[$i + 1] =~ $fence_re;
  for my $j ($i + 1 .. $#$lines) {
    return $j if $lines->[$j] =~ $end_snippet_re;
    last if $j > $i + 1 && $lines->[$j] =~ $snippet_re;
  }
  die "md_filter.pl: $page:" . ($i + 1) . ": snippet '$name': the code block below the marker "
    . "has no `<!-- end snippet -->` line after its closing fence (the next marker or the end "
    . "of the page comes first): add it there, or delete the block, then $fix_snippets\n";
}

# md_filter.pl --expand FILE...: rewrites the copy below every snippet marker of each chapter
# page from its main.cpp (scripts/update_snippets.sh runs it over chapters/*/README.md).
# A page is rewritten, through a temporary file and a rename, only when something changed.
if (@ARGV && $ARGV[0] eq '--expand') {
  shift @ARGV;
  die "usage: md_filter.pl --expand FILE...\n" unless @ARGV;
  for my $page (@ARGV) {
    open(my $in, '<:raw', $page) or die "md_filter.pl: cannot read $page: $!\n";
    my @lines = <$in>;
    close $in;
    (my $dir = $page) =~ s{[^/]*$}{};
    my (@out, @changed);
    my $fence = '';
    for (my $i = 0; $i < @lines; ++$i) {
      my $line = $lines[$i];
      push @out, $line;
      if ($fence ne '') {
        $fence = '' if $line =~ /^\s*\Q$fence\E\s*$/;
      } elsif ($line =~ $fence_re) {
        $fence = $1;
      } elsif ($line =~ $snippet_re) {
        my ($file, $name) = ($1, $2);
        my $end = copy_end($page, $name, \@lines, $i);
        my ($indent) = $line =~ /^( *)/;
        my @copy = snippet_copy($indent, snippet_region($page, $dir . $file, $name));
        push @copy, "$indent<!-- end snippet -->\n";
        my @old = $end >= 0 ? @lines[$i + 1 .. $end] : ();
        push @changed, $name if join('', @copy) ne join('', @old);
        push @out, @copy;
        $i = $end if $end >= 0;
      } elsif ($line =~ $end_snippet_re) {
        die "md_filter.pl: $page:" . ($i + 1) . ": `<!-- end snippet -->` without a snippet "
          . "marker and its copy above it: delete the line\n";
      }
    }
    next unless @changed;
    my $tmp = "$page.tmp$$";
    open(my $out, '>:raw', $tmp) or die "md_filter.pl: cannot write $tmp: $!\n";
    print $out @out or die "md_filter.pl: cannot write $tmp: $!\n";
    close $out or die "md_filter.pl: cannot write $tmp: $!\n";
    chmod((stat $page)[2] & 07777, $tmp);
    rename($tmp, $page) or die "md_filter.pl: cannot replace $page: $!\n";
    print "$page: copied " . join(", ", @changed) . " from their sources\n";
  }
  exit 0;
}

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
  return '@ref ' . $1 if $target =~ m{(?:^|/)common/(?:attn|course)/(?:[a-z_]+/)*([A-Za-z0-9_]+\.hpp)$};
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

my @page = <$in>;
close $in;
(my $page_dir = $path) =~ s{[^/]*$}{};
for (my $i = 0; $i < @page; ++$i) {
  my $line = $page[$i];
  my $n = $i + 1;           # the line number, for messages
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
    die "md_filter.pl: $path:$n: no \$formula\$ in a heading (Doxygen cannot typeset one there); "
      . "write it in plain text: $line";
  }
  if (!$titled && $line =~ /^#\s+(.*?)\s*$/) {          # the page title gets its label
    $titled = 1;
    my $title = inline($1);
    print defined $chapter_no ? "# $title {#ch$chapter_no}\n"
        : defined $docs_page ? "# $title {#$docs_page}\n" : "# $title\n";
    next;
  }
  # A figure: the page links its copy in docs/figures/, committed so that GitHub shows it
  # (scripts/update_figures.sh; the test figures_are_current keeps it current), while the site
  # takes the file the chapter has just drawn into plots/ (IMAGE_PATH). Not plots/ on the page:
  # git ignores it, so GitHub would show a broken image. A diagram of docs/diagrams/: the site
  # takes the .svg that dot rendered from its .dot into the build (IMAGE_PATH), not the copy
  # committed beside the source for GitHub.
  if ($line =~ /^\s*!\[[^\]]*\]\((?:[^)]*\/)?plots\/([A-Za-z0-9_.-]+\.png)\)\s*$/) {
    die "md_filter.pl: $path:$n: a figure of plots/, which git ignores, so GitHub would show a "
      . "broken image: link its copy docs/figures/$1 (from a chapter page "
      . "../../docs/figures/$1) and run scripts/update_figures.sh: $line";
  }
  if ($line =~ /^\s*!\[([^\]]*)\]\((?:[^)]*\/)?(?:docs\/figures\/([A-Za-z0-9_.-]+\.png)|docs\/diagrams\/([A-Za-z0-9_.-]+\.svg))\)\s*$/) {
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
  # A code excerpt: the site pulls the region from main.cpp with its line numbers; the copy
  # below the marker, which GitHub shows, is dropped after checking that it is the region now.
  if ($line =~ $snippet_re) {
    my ($file, $name) = ($1, $2);
    die "md_filter.pl: $path: snippets are only for chapter pages\n" unless defined $chapter_dir;
    my $end = copy_end($path, $name, \@page, $i);
    if ($end < 0) {
      die "md_filter.pl: $path:$n: snippet '$name' has no copy of the region below its marker, "
        . "so GitHub shows nothing there: $fix_snippets\n";
    }
    my ($indent) = $line =~ /^( *)/;
    my @want = snippet_copy($indent, snippet_region($path, $page_dir . $file, $name));
    my @have = @page[$i + 1 .. $end - 1];
    for my $k (0 .. (@want > @have ? $#want : $#have)) {
      next if $k <= $#want && $k <= $#have && $want[$k] eq $have[$k];
      die "md_filter.pl: $path:" . ($i + 2 + $k) . ": snippet '$name': the copy on the page is "
        . "not the region [$name] of $file as it is now (first difference on this "
        . "line): $fix_snippets\n";
    }
    # A worked answer's region lives in tests/ (../../tests/chapters/...): Doxygen is given the
    # path from the top of the repository, without the "NN_x/../../".
    (my $site_file = "$chapter_dir/$file") =~ s{^chapters/[^/]+/\.\./\.\./}{};
    print "$indent\\snippet{lineno} $site_file $name\n";
    $i = $end;
    next;
  }
  if ($line =~ $end_snippet_re) {
    die "md_filter.pl: $path:$n: `<!-- end snippet -->` without a snippet marker and its copy "
      . "above it: delete the line\n";
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
    die "md_filter.pl: $path:$n: bold text may not start with a \$formula\$ (Doxygen then prints "
      . "the asterisks); start it with a word: $line";
  }
  if ($line =~ /\*\*[^*\s][^*]*(?<![\\])\$[^*]*\*\*/) {  # nor one with a formula inside
    die "md_filter.pl: $path:$n: bold text may not hold a \$formula\$ (Doxygen then prints the "
      . "asterisks); write the formula outside the bold words: $line";
  }
  my $out = inline($line);
  # A $ left over (not \f$, not \$, not in a code span) is half a formula: GitHub would join
  # it with the next line's, Doxygen would print TeX. Inline formulas stay on one line.
  (my $bare = $out) =~ s/`+[^`]*`+//g;
  if ($bare =~ /(?<!\\f)(?<!\\)\$/) {
    die "md_filter.pl: $path:$n: a \$ without its partner on this line "
      . "(keep each \$formula\$ on one line; write \\\$ for a dollar sign): $line";
  }
  print $out;
}
