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
#   ( \(x\)                              ->  (\(x\)     (Doxygen puts a space between an opening
#                                                        bracket and an inline formula)
#   a class's summary link to a section the page does not have: removed
#   MathJax's "output/HTML-CSS"          ->  "output/CommonHTML"  (MathJax 2's lighter output,
#                                             which Doxygen 1.9.4 ignores MATHJAX_FORMAT = chtml
#                                             for: chapters 04, 07, 09 and 10 typeset in 5.2-5.8 s
#                                             instead of 6.4-6.6 s, with the same TeX fonts)
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

my ($figures, $spaces, $dead) = (0, 0, 0);
for my $page (@pages) {
  my $path = "$dir/$page";
  open(my $in, '<:raw', $path) or die "polish_html.pl: cannot read $path: $!\n";
  my $html = do { local $/; <$in> };
  close $in;

  $figures += $html =~ s{<div class="image">\s*(?|<img src="([^"]+)" alt=""/>|<object type="image/svg\+xml" data="([^"]+)"[^>]*></object>)\s*<div class="caption">\s*(.*?)</div>}
    {'<div class="image"><a href="' . $1 . '" title="open at full size"><img src="' . $1
      . '" alt="' . plain($2) . '"/></a>' . "\n" . '<div class="caption">' . "\n"
      . $2 . '</div>'}gse;
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

  # Written next to the page and renamed over it: a failure never leaves half a page.
  open(my $out, '>:raw', "$path.tmp") or die "polish_html.pl: cannot write $path.tmp: $!\n";
  print $out $html or die "polish_html.pl: cannot write $path.tmp: $!\n";
  close $out or die "polish_html.pl: cannot write $path.tmp: $!\n";
  rename "$path.tmp", $path or die "polish_html.pl: cannot replace $path: $!\n";
}
print "polish_html.pl: ", scalar(@pages), " pages, $figures figures given alt text and a link, ",
  "$spaces spaces before formulas removed, $dead links to missing sections removed\n";
