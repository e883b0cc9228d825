#!/usr/bin/perl
# polish_html.pl HTML_DIR: the last touches Doxygen 1.9.4 cannot be told to make, applied in
# place to every page it wrote (the `docs` target runs it right after Doxygen):
#
#   <img src="a.png" alt=""/>            ->  <a href="a.png" title="open at full size">
#   <div class="caption">Caption</div>        <img src="a.png" alt="Caption"/></a>
#                                             (a figure's caption becomes its alt text, and a
#                                             click opens the figure at full size; a diagram's
#                                             .svg, which Doxygen embeds as an <object>, becomes
#                                             an <img> the same way)
#   a heat map's figure                  ->  + <details class="twin"><iframe src="a.html">
#                                             (its interactive twin, when the chapter wrote one
#                                             and the docs target copied it beside the page)
#   ( \(x\)                              ->  (\(x\)     (Doxygen puts a space between an opening
#                                                        bracket and an inline formula)
#   a class's summary link to a section the page does not have: removed
#   MathJax's "output/HTML-CSS"          ->  "output/CommonHTML"  (MathJax 2's lighter output,
#                                             which Doxygen 1.9.4 ignores MATHJAX_FORMAT = chtml
#                                             for: chapters 04, 07, 09 and 10 typeset in 5.2-5.8 s
#                                             instead of 6.4-6.6 s, with the same TeX fonts)
#   a chapter page's <h1>/<h2> headings  ->  anchored (GitHub's ids), a # link to each, and a
#                                             table of contents at the top of the page
#   the menu bar: Main Page, Related      ->  The course, Chapters, Reference (Namespaces,
#   Pages, Namespaces, ..., Files             Concepts, Classes, Files inside it)
#   glossary_8md.html, README_8md.html, ...  removed: the "File Reference" page EXTRACT_ALL
#                                             makes for every Markdown file, empty (the text is
#                                             on the file's own page, glossary.html, ch01.html)
#                                             and reached only by the search box and by words
#                                             that name the file ("docs/glossary.md"): those
#                                             links become plain text, those search entries go
#
# Only perl-base (Essential on Debian).
use strict;
use warnings;

my $dir = shift @ARGV or die "usage: polish_html.pl HTML_DIR\n";
opendir(my $dh, $dir) or die "polish_html.pl: cannot read $dir: $!\n";
my @pages = sort grep { /\.html$/ } readdir $dh;
closedir $dh;
die "polish_html.pl: no pages in $dir\n" unless @pages;

# The text a screen reader should say for a caption: no tags, formulas read as their TeX.
sub plain {
  my ($html) = @_;
  $html =~ s/<[^>]*>//g;
  $html =~ s/\\[()]//g;
  $html =~ s/\s+/ /g;
  $html =~ s/^ | $//g;
  $html =~ s/"/&quot;/g;
  return $html;
}

# A heat map's interactive twin (the chapter wrote <name>.html beside <name>.png, and the docs
# target copied it here): embedded under the figure, folded, loaded only when opened.
my $twins = 0;
sub twin {
  my ($png) = @_;
  (my $name = $png) =~ s/\.png$// or return '';
  return '' unless -f "$dir/$name.html";
  ++$twins;
  return "\n" . '<details class="twin"><summary>Explore this figure cell by cell</summary>'
    . '<iframe src="' . $name . '.html" loading="lazy" title="' . $name
    . ': the figure\'s numbers, cell by cell"></iframe></details>';
}

# The anchor GitHub gives a heading: its text without tags, lower case, every character but
# letters, digits, spaces and hyphens dropped, spaces as hyphens; a repeat gets -1, -2, ...
sub heading_id {
  my ($inner, $seen) = @_;
  (my $id = lc plain($inner)) =~ s/&[a-z]+;//g;
  $id =~ s/[^a-z0-9 _-]//g;
  $id =~ s/ /-/g;
  my $n = $seen->{$id}++;
  return $n ? "$id-$n" : $id;
}

# The headings of a chapter page (<h1> sections, <h2> subsections) anchored, and a table of
# contents of them put first in its text. Returns 1 when the page got one.
sub contents_table {
  my ($html) = @_;
  my (%seen, @entries);
  $$html =~ s{<h([12])>(.*?)</h\1>}{
    my ($level, $inner) = ($1, $2);
    my $id = heading_id($inner, \%seen);
    push @entries, [$level, $id, $inner];
    qq{<h$level id="$id">$inner<a class="heading-link" href="#$id" aria-label="link to this section">#</a></h$level>}
  }ge;
  return 0 unless @entries;
  # Sections with their subsections under them (a subsection before any section stands alone).
  my @sections;
  for my $e (@entries) {
    if ($e->[0] == 1 || !@sections) { push @sections, [$e, []] } else { push @{$sections[-1][1]}, $e }
  }
  my $toc = qq{<nav class="page-toc" aria-label="On this page"><details open><summary>On this page</summary>\n<ul>\n};
  for my $section (@sections) {
    my ($head, $subs) = @$section;
    $toc .= qq{<li><a href="#$head->[1]">$head->[2]</a>};
    $toc .= '<ul>' . join('', map { qq{<li><a href="#$_->[1]">$_->[2]</a></li>} } @$subs) . '</ul>' if @$subs;
    $toc .= "</li>\n";
  }
  $toc .= "</ul></details></nav>\n";
  $$html =~ s{(<div class="contents">\s*<div class="textblock">)}{$1$toc} or return 0;
  return 1;
}

sub slurp {
  my ($path) = @_;
  open(my $in, '<:raw', $path) or die "polish_html.pl: cannot read $path: $!\n";
  my $text = do { local $/; <$in> };
  close $in;
  return $text;
}

# Written next to the file and renamed over it: a failure never leaves half a file.
sub spew {
  my ($path, $text) = @_;
  open(my $out, '>:raw', "$path.tmp") or die "polish_html.pl: cannot write $path.tmp: $!\n";
  print $out $text or die "polish_html.pl: cannot write $path.tmp: $!\n";
  close $out or die "polish_html.pl: cannot write $path.tmp: $!\n";
  rename "$path.tmp", $path or die "polish_html.pl: cannot replace $path: $!\n";
}

# The Markdown files' "File Reference" pages (Doxygen writes "x.md" as x_8md.html). Each must be
# empty: what a Markdown page says is on its own page, and a file page with something on it
# (a function documented from a .md) would be lost with it.
my %gone;
for my $page (grep { /_8md\.html$/ } @pages) {
  my ($contents) = slurp("$dir/$page") =~ m{<div class="contents">(.*?)</div><!-- contents -->}s;
  die "polish_html.pl: $page is not the empty page of a Markdown file; document code in a "
    . "header, not in a .md\n" unless defined $contents && $contents !~ /\S/;
  $gone{$page} = 1;
}
@pages = grep { !$gone{$_} } @pages;

my ($figures, $spaces, $dead, $unlinked, $tocs) = (0, 0, 0, 0, 0);
for my $page (@pages) {
  my $path = "$dir/$page";
  my $html = slurp($path);

  $figures += $html =~ s{<div class="image">\s*(?|<img src="([^"]+)" alt=""/>|<object type="image/svg\+xml" data="([^"]+)"[^>]*></object>)\s*<div class="caption">\s*(.*?)</div>}
    {'<div class="image"><a href="' . $1 . '" title="open at full size"><img src="' . $1
      . '" alt="' . plain($2) . '"/></a>' . "\n" . '<div class="caption">' . "\n"
      . $2 . '</div>' . twin($1)}gse;
  $spaces += $html =~ s{([(\[]) (\\\()}{$1$2}g;
  $html =~ s{"output/HTML-CSS"}{"output/CommonHTML"}g;
  # A class's summary bar links each section; for a private nested class Doxygen 1.9.4 links
  # a "Classes" section it then does not write. Such a link goes.
  my %ids = map { $_ => 1 } ($html =~ /\b(?:id|name)="([^"]+)"/g);
  $html =~ s{<div class="summary">.*?</div>}{
    (my $bar = $&) =~ s{<a href="#([^"]+)">[^<]*</a> &#124;\n}{
      $ids{$1} ? $& : do { ++$dead; '' }
    }ge;
    $bar
  }se;

  # A chapter page: every section heading gets an anchor (GitHub's: the words, lower case,
  # joined by hyphens), a link to itself, and a line in a table of contents at the top.
  $tocs += contents_table(\$html) if $page =~ /^ch\d\d\.html$/;

  # A word that names a Markdown file ("docs/sources.md") links its removed page: plain text.
  $html =~ s{<a\b[^>]*\bhref="([^"#]*)(?:#[^"]*)?"[^>]*>(.*?)</a>}{
    $gone{$1} ? do { ++$unlinked; $2 } : $&
  }gse;

  spew($path, $html);
}

# The search box's entries for the removed pages: each entry is a line
#   ['key',['Name',['../page.html',1,'scope'],['../other.html',1,'scope']]]
# of a search/<kind>_<n>.js list; a removed page's target goes, and the entry when none is left.
# (A list left with no entry stays, an empty result for its letter.)
my $searched = 0;
opendir(my $sh, "$dir/search") or die "polish_html.pl: cannot read $dir/search: $!\n";
for my $list (sort grep { /^\w+_\w+\.js$/ && $_ ne 'searchdata.js' } readdir $sh) {
  my $path = "$dir/search/$list";
  my $js = slurp($path);
  my ($head, $body, $tail) = $js =~ /\A(var searchData=\s*\[\n)(.*?)\n?(\];\s*)\z/s
    or die "polish_html.pl: $path is not a search list\n";
  my @entries = grep {
    my $kept = s{,\['\.\./([^'#]*)[^']*',\d+,'(?:[^'\\]|\\.)*'\]}{ $gone{$1} ? '' : $& }ger;
    $searched += $kept ne $_;
    $_ = $kept;
    $kept =~ /,\['\.\.\//;
  } split /(?<=\]),\n/, $body;
  spew($path, $head . join(",\n", @entries) . "\n" . $tail);
}
closedir $sh;

for my $page (sort keys %gone) {
  unlink "$dir/$page" or die "polish_html.pl: cannot remove $dir/$page: $!\n";
}
# The menu bar: the course first, then its chapters, then one "Reference" menu holding what
# Doxygen puts first (Namespaces, Concepts, Classes, Files), so that a learner's eye meets the
# chapters, not the API. menudata.js is one entry per line, the top level's after `children:[`.
my $menu_path = "$dir/menudata.js";
my $menu = slurp($menu_path);
$menu =~ s/\{text:"Main Page",url:"index\.html"\}/{text:"The course",url:"index.html"}/
  or die "polish_html.pl: $menu_path has no \"Main Page\" entry\n";
$menu =~ s/\{text:"Related Pages",url:"pages\.html"\},\n(.*)\]\}\s*\z/{text:"Chapters",url:"pages.html"},\n{text:"Reference",url:"namespaces.html",children:[\n$1]}]}\n/s
  or die "polish_html.pl: $menu_path: no \"Related Pages\" entry before the reference's\n";
spew($menu_path, $menu);

print "polish_html.pl: ", scalar(@pages), " pages, $figures figures given alt text and a link ",
  "($twins with their interactive twin), $tocs chapter pages given a table of contents, ",
  "$spaces spaces before formulas removed, $dead links to missing sections removed, ",
  scalar(keys %gone), " empty pages of Markdown files removed with $unlinked links and ",
  "$searched search entries to them\n";
