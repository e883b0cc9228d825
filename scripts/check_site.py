#!/usr/bin/python3
"""Loads every page of the built site in headless Chromium, as a reader's browser would, and fails
on what a reader would see broken:

  - TeX left raw after MathJax ran (\\( ... \\), $...$, a \\command in the text; Doxygen's \\f$,
    \\f[, \\f] or \\f( anywhere, code spans and code blocks too), a MathJax error, or a page still
    showing "Processing math";
  - source markup shown as written: Markdown (**bold**, [a link](target), any backtick in the
    text) or Doxygen's (@ref, \\ref, \\image, \\snippet, \\htmlonly, a {#label}) in the text or
    a code span;
  - an image that does not load, or a figure without alt text;
  - a local link to a file that does not exist, to an anchor its page does not have, or to a file
    outside the site (file:// links are the reader's own disk, not the course);
  - a page, or anything in its text column, wider than the window at 1280 px, and for the
    front page and the chapter pages at 390 px too (a phone);
  - a page with nothing under its title (Doxygen writes one for every file and folder it reads),
    or a folder's page that does not say what the folder holds (a \\dir comment);
  - a figure's interactive twin (a heat map's .html, which the site embeds beside its PNG) where
    hovering a cell does not show that cell: in its first map and, for a grid, in its last, the
    check rests the pointer on a cell and reads the page's readout, which must name the cell's
    row and column (with their labels) and its value as the figure's data holds them; and a
    twin that shows the scores before the softmax beside its weights, where a row's weights are
    not the softmax of its scores.

    scripts/check_site.py build/release/docs/html        check the site (exit 1 on a defect)
    scripts/check_site.py --self-test DIR                 prove the check fails: DIR's pages each
                                                          plant one defect (tests/repository/site_defects)

Pages are shared between two browsers, one per core. Needs Debian's chromium, chromium-driver and
python3-selenium (scripts/setup.sh installs them).
"""
import argparse
import concurrent.futures
import decimal
import html
import math
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time
import urllib.parse

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains

WIDTH, HEIGHT = 1280, 900

# Runs in the page once MathJax has finished its first typesetting (or at once when the page has
# no MathJax). Returns the page's problems and its links.
PAGE_CHECK = r"""
const done = arguments[arguments.length - 1];
function check() {
  const problems = [];
  const say = (what) => { if (problems.length < 20) problems.push(what); };
  const excerpt = (s) => s.replace(/\s+/g, ' ').trim().slice(0, 80);

  // The text a reader sees, in three kinds: prose; code spans (inline <code>); and code blocks
  // (listings, excerpts, the reference pages' declarations), which show C++ as it is written.
  // Hidden from the reader: scripts, styles, MathJax's previews and messages, the search box.
  const hidden = 'script, style, noscript, .MathJax_Preview, #MathJax_Message, ' +
                 '#MSearchResultsWindow';
  const block = 'pre, div.fragment, div.memproto, table.memberdecls, table.memname';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let text = '', spans = '', blocks = '';
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const e = n.parentElement;
    if (!e || e.closest(hidden)) continue;
    if (e.closest(block)) blocks += n.nodeValue + '\n';
    else if (e.closest('code')) spans += n.nodeValue + '\n';
    else text += n.nodeValue + '\n';
  }
  const report = (what, where, re) => {
    const m = where.match(re);
    if (m) {
      const at = Math.max(0, m.index - 30);
      say(what + ': "' + excerpt(where.slice(at, m.index + 50)) + '"');
    }
  };
  // Doxygen's own formula marks (\f$ \f[ \f] \f( \f) \f{ \f}, which md_filter.pl writes) mean
  // Doxygen did not read a formula: wherever they show, code included, they are raw TeX. A
  // backtick quote `like this' once made Doxygen open a code span that swallowed three formulas.
  const doxygenTex = /\\f[$\[\]()}{]/;
  report('raw TeX left after MathJax, in code', spans + blocks, doxygenTex);
  const rawTex = [/\\[()\[\]]/, doxygenTex, /\$\$/, /\$[^$\s][^$\n]*[^$\s\\]\$/,
                  /\\(frac|mathrm|mathbf|sqrt|top|cdot|sum|left|right|begin|end|text)\b/];
  for (const re of rawTex) report('raw TeX left after MathJax', text, re);
  // The other commands md_filter.pl writes for Doxygen (a link's @ref, a figure's \image, an
  // excerpt's \snippet, an answer's \htmlonly, a heading's {#label}), and the ones a page could
  // hold, shown as written: in prose or a code span, where a C++ excerpt cannot explain them.
  const doxygenCommand =
      /(^|[^\w\\@])[\\@](ref|image|snippet|(end)?htmlonly|anchor|(sub)*page|(sub)*section|cite)\b/;
  const doxygenLabel = /\{#[\w-]+\}/;
  for (const re of [doxygenCommand, doxygenLabel]) {
    report('Doxygen markup left raw', text, re);
    report('Doxygen markup left raw, in code', spans, re);
  }
  for (const e of document.querySelectorAll('.MathJax_Error, .merror, .mjx-merror'))
    say('MathJax error: "' + excerpt(e.textContent) + '"');
  const message = document.getElementById('MathJax_Message');
  if (message && message.offsetParent !== null && message.textContent.trim())
    say('MathJax still says "' + excerpt(message.textContent) + '"');
  // Markdown Doxygen did not convert: **bold**, a [link](target), or a backtick in prose. Prose
  // never holds a backtick of its own: one left over is a code span Doxygen did not close, or
  // one whose opening backtick it read as a quotation mark (`rescale e^(m' - m_j)` became
  // "'rescale e^(m' - m_j)" and the next code span took the rest of the paragraph).
  // (A bold phrase with a formula inside spans several text nodes: any ** left is raw.)
  // An opening ** (after a space, before a word) left in the text; "xoshiro256**" is a name.
  for (const re of [/(^|\s)\*\*[^\s*][^\n]{0,40}/, /`/, /\[[^\]\n]+\]\([^)\s]+\)/])
    report('Markdown left raw', text, re);
  if (/Processing math/.test(document.body.innerText))
    say('"Processing math" on the page');

  // Images: loaded (waited for above), and figures described.
  for (const img of document.images) {
    const src = img.getAttribute('src') || '';
    if (!img.complete || img.naturalWidth === 0) say('image does not load: ' + src);
    if (img.closest('div.image') && !(img.getAttribute('alt') || '').trim())
      say('figure without alt text: ' + src);
  }

  // Width: the page, the scrolling text column, and what sits in it.
  if (document.documentElement.scrollWidth > window.innerWidth + 1)
    say('page is ' + document.documentElement.scrollWidth + ' px wide in a ' +
        window.innerWidth + ' px window');
  const column = document.getElementById('doc-content');
  if (column && column.scrollWidth > column.clientWidth + 1)
    say('text column scrolls sideways: ' + column.scrollWidth + ' px of content in ' +
        column.clientWidth + ' px');
  const contents = document.querySelector('div.contents');
  if (contents) {
    const right = Math.min(contents.getBoundingClientRect().right,
                           column ? column.getBoundingClientRect().right : window.innerWidth);
    const wide = 'img, table, div.fragment, pre, .MJXc-display, .mjx-chtml, h1, h2, h3, p';
    for (const e of contents.querySelectorAll(wide)) {
      // A box that scrolls on purpose (overflow-x: auto) may hold something wider than itself.
      let scroller = null;
      for (let a = e.parentElement; a && a !== contents; a = a.parentElement) {
        const o = getComputedStyle(a).overflowX;
        if (o === 'auto' || o === 'scroll') { scroller = a; break; }
      }
      if (scroller) continue;
      const r = e.getBoundingClientRect();
      if (r.width > 0 && r.right > right + 1) {
        say('wider than the text column (' + Math.round(r.right - right) + ' px past it): <' +
            e.tagName.toLowerCase() + '> "' + excerpt(e.textContent || e.getAttribute('src') || '') + '"');
      }
      const o = getComputedStyle(e).overflowX;
      if ((o === 'auto' || o === 'scroll' || o === 'hidden') && e.scrollWidth > e.clientWidth + 1 &&
          e.matches('.MJXc-display, p, h1, h2, h3')) {
        say('cut off or scrolling: <' + e.tagName.toLowerCase() + '> "' + excerpt(e.textContent) + '"');
      }
    }
  }

  // Every page a link leads to holds something, and a folder's page says what the folder is for:
  // with EXTRACT_ALL Doxygen gives every folder an input file sits in a page and a place in the
  // Files tree (build/ once did, for the generated gallery), and every Markdown file an empty page.
  if (contents && !contents.textContent.trim() && !contents.querySelector('img, object, svg'))
    say('empty page: nothing under its title');
  const title = document.querySelector('div.headertitle div.title');
  if (title && / Directory Reference$/.test(title.textContent.trim()) && !document.getElementById('details'))
    say('folder page without a description (a \\dir comment saying what "' +
        title.textContent.trim().replace(/ Directory Reference$/, '') + '" holds)');

  const links = Array.from(document.querySelectorAll('a[href]'), a => a.href);
  done({problems, links});
}
// Images the page's scripts add late (the search box's icons) may still be on their way.
function whenImagesSettle() {
  const waiting = Array.from(document.images, img => img.complete ? null : new Promise(settled => {
    img.addEventListener('load', settled);
    img.addEventListener('error', settled);
    setTimeout(settled, 5000);
  })).filter(p => p);
  Promise.all(waiting).then(check);
}
// MathJax 2 posts "End" once its first typesetting is over; then whatever it queued has run.
const started = Date.now();
function whenTypeset() {
  const posted = window.MathJax && MathJax.Hub && MathJax.Hub.Startup.signal.posted;
  if (posted && posted.includes('End')) MathJax.Hub.Queue(whenImagesSettle);
  else if (Date.now() - started > 45000) done({problems: ['MathJax never finished'], links: []});
  else setTimeout(whenTypeset, 50);
}
const hasMath = arguments[0];  // else the checker kept MathJax from loading: nothing to typeset
if (!hasMath) {
  whenImagesSettle();
} else if (window.MathJax) {
  whenTypeset();
} else {
  done({problems: ['MathJax did not load'], links: []});
}
"""


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = '/usr/bin/chromium'
    for flag in ('--headless=new', f'--window-size={WIDTH},{HEIGHT}', '--disable-gpu',
                 '--hide-scrollbars', '--allow-file-access-from-files', '--disable-extensions',
                 '--force-device-scale-factor=1'):
        options.add_argument(flag)
    if os.geteuid() == 0:  # Chromium refuses to start its sandbox as root (CI runs as root)
        options.add_argument('--no-sandbox')
    driver = webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=options)
    driver.set_script_timeout(60)
    driver.set_page_load_timeout(60)
    return driver


# The sidebar's tree and the search index are the same data on every page: the main page loads
# them, the others skip them (a third of a reference page's load).
SHARED_DATA = ['*/navtreedata.js', '*/navtreeindex*.js', '*/search/searchdata.js']


def visit(pages):
    """Loads each page in one browser; returns {page: result}."""
    results = {}
    driver = browser()
    driver.execute_cdp_cmd('Network.enable', {})
    blocked = None
    try:
        for page in pages:
            # Doxygen puts MathJax on every page; starting it on the pages without a formula
            # (nearly all the reference pages) would double the check's time for nothing.
            html = page.read_bytes()
            has_math = b'\\(' in html or b'\\[' in html
            block = ([] if page.name == 'index.html' else SHARED_DATA) + \
                    ([] if has_math else ['*/MathJax.js*'])
            if block != blocked:
                blocked = block
                driver.execute_cdp_cmd('Network.setBlockedURLs', {'urls': block})
            try:
                driver.get(page.as_uri())
                results[page] = driver.execute_async_script(PAGE_CHECK, has_math)
                if b'id="figure-data"' in html:
                    results[page]['problems'] += hover_problems(driver)
                if PHONE_PAGES.match(page.name):
                    results[page]['problems'] += phone_problems(driver, page, has_math)
            except WebDriverException as e:
                results[page] = {'problems': ['the browser failed: ' + e.msg.splitlines()[0]],
                                 'links': []}
    finally:
        driver.quit()
    return results


def js_number(v):
    """A JSON number as the viewer prints it, JavaScript's String(v) (ECMA-262's
    Number::toString: the shortest digits, exponential only below 1e-6 or from 1e21), or the
    name of a non-finite one."""
    if isinstance(v, str):
        return {'inf': '+\u221e', '-inf': '\u2212\u221e'}.get(v, 'NaN')
    x = float(v)
    if x == 0:
        return '0'
    t = decimal.Decimal(repr(abs(x))).normalize().as_tuple()
    digits = ''.join(map(str, t.digits))
    k, n = len(digits), len(digits) + t.exponent  # x = 0.digits * 10^n
    if k <= n <= 21:
        text = digits + '0' * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + '.' + digits[n:]
    elif -6 < n <= 0:
        text = '0.' + '0' * -n + digits
    else:
        text = digits[0] + ('.' + digits[1:] if k > 1 else '') + f'e{"+" if n > 0 else "-"}{abs(n - 1)}'
    return ('-' if x < 0 else '') + text


def hover_problems(driver):
    """Rests the pointer on a cell of a twin's first map (and, for a grid, of its last, picked
    in the page's menu), and checks that the readout shows that cell. Returns the problems."""
    data = driver.execute_script('return JSON.parse(document.getElementById("figure-data").textContent)')
    problems = []
    panels = data['panels']
    for n in sorted({0, len(panels) - 1}):
        p = panels[n]
        if len(panels) > 1:
            driver.execute_script('const s = document.getElementById("panel"); s.value = arguments[0];'
                                  's.dispatchEvent(new Event("change"));', str(n))
        # The cell: the middle one, or the nearest allowed one before it (a blocked cell shows
        # no value in the PNG, but the readout still names it).
        i, j = p['rows'] // 2, p['cols'] // 2
        canvas = driver.find_element('id', 'map')
        driver.execute_script('arguments[0].scrollIntoView({block: "center", inline: "center"})', canvas)
        px, left, top = (float(canvas.get_attribute('data-' + k)) for k in ('cell-px', 'left', 'top'))
        x = left + (j + 0.5) * px - canvas.size['width'] / 2
        y = top + (i + 0.5) * px - canvas.size['height'] / 2
        ActionChains(driver).move_to_element_with_offset(canvas, round(x), round(y)).perform()
        text = driver.find_element('id', 'readout').text
        k = i * p['cols'] + j
        base = data['first_index']
        want = [f"{data['ylabel'] or 'row'} {i + base}", f"{data['xlabel'] or 'column'} {j + base}",
                f"{data['value_name']} {js_number(p['values'][k])}"]
        if p['ytics']:
            want.append(f"\u201c{p['ytics'][i]}\u201d")
        if p['xtics']:
            want.append(f"\u201c{p['xtics'][j]}\u201d")
        if p['scores'] is not None:
            want.append(f"score before softmax {js_number(p['scores'][k])}")
        missing = [w for w in want if w not in text]
        if missing:
            problems.append(f'hovering a cell: map {n + 1}, cell ({i + base}, {j + base}) reads '
                            f'"{text}", without {missing}')
    return problems + score_problems(data)


def score_problems(data):
    """A twin that shows scores beside weights: each row's weights must be the softmax of its
    scores over the allowed keys (a blocked key weighs 0), or, in the notes' layout of chapters
    02 and 03 (keys down, queries across), each column's; else the two numbers of a cell belong
    to different computations. The tolerance is what the page's rounding and float32 allow:
    both are shown to 6 significant digits, so a score may be off by 5e-6 of itself (half a unit
    of the sixth digit of 1.00000), which moves a weight by at most twice the largest such error;
    a weight by 5e-6; and the chapters compute in float32, a few units of its 1.2e-7 on numbers
    at most 1 (a score the twin shows 11.3493 may be 11.34935: at a weight of 0.66 the softmax
    then moves by 1.7e-5, as chapter 12's word-start head showed). Returns the problems."""
    if data['value_name'] != 'weight':
        return []

    def value(v):  # a JSON number, or the name the twin gives a non-finite one
        return float(v) if not isinstance(v, str) else {'inf': math.inf, '-inf': -math.inf}.get(v, math.nan)

    def first_wrong(p, lines):
        """The first line (a list of cell indices) whose weights are not its scores' softmax."""
        for cells in lines:
            allowed = [k for k in cells if (p['allowed'] is None or p['allowed'][k])
                       and value(p['scores'][k]) != -math.inf]
            if not allowed:
                continue  # nothing to attend to: the weights are zeros, and there is no softmax
            scores = {k: value(p['scores'][k]) for k in allowed}
            top = max(scores.values())
            total = sum(math.exp(s - top) for s in scores.values())
            tolerance = 2 * 5e-6 * max(abs(s) for s in scores.values()) + 5e-6 + 8 * 1.2e-7
            for k in cells:
                want = math.exp(scores[k] - top) / total if k in scores else 0.0
                if not abs(value(p['values'][k]) - want) <= tolerance:
                    return k, want
        return None

    problems = []
    for n, p in enumerate(data['panels']):
        if p['scores'] is None:
            continue
        rows, cols, base = p['rows'], p['cols'], data['first_index']
        by_row = first_wrong(p, [range(i * cols, (i + 1) * cols) for i in range(rows)])
        if by_row and first_wrong(p, [range(j, rows * cols, cols) for j in range(cols)]):
            k, want = by_row
            problems.append(f'map {n + 1}, cell ({k // cols + base}, {k % cols + base}): the weights '
                            f'are not the softmax of its scores, by row or by column (weight '
                            f'{p["values"][k]}, the softmax of its row\'s scores {want:.6g})')
    return problems


# The pages a learner reads on a phone too: the front page and the chapters, checked again in a
# window as wide as a phone's (390 px, an iPhone 12 to 15) for the same defects.
PHONE_PAGES = re.compile(r'^(index|ch\d\d)\.html$')
PHONE_WIDTH = 390


def phone_problems(driver, page, has_math):
    """The page's problems in a 390 px window (the window is put back to 1280 px after)."""
    driver.set_window_size(PHONE_WIDTH, 844)
    try:
        driver.get(page.as_uri())
        found = driver.execute_async_script(PAGE_CHECK, has_math)['problems']
    finally:
        driver.set_window_size(WIDTH, HEIGHT)
    return [f'at {PHONE_WIDTH} px: {p}' for p in found]


BROWSERS = 2  # one per core

# Doxygen's generated listings are links and code in Doxygen's own fixed layout, nothing the course
# wrote: every member of a class, the alphabetical indexes of functions and namespace members and
# the headers' source listings. They are over half the site's pages; their links are checked from
# the HTML, without a browser, which keeps the check within a minute. Every other page (the
# course's pages, and the reference pages of namespaces, classes, headers and folders, which carry
# the headers' own documentation) is loaded.
LISTING = re.compile(r'(-members\.html|^functions(_\w+)?\.html|^namespacemembers(_\w+)?\.html'
                     r'|_source\.html)$')

HREF = re.compile(r'<a\b[^>]*?\bhref="([^"]*)"')
ANCHOR = re.compile(r'\b(?:id|name)="([^"]+)"')


def anchors_of(page, cache={}):
    """The ids and names a page's links can point at, read from its HTML."""
    if page not in cache:
        cache[page] = set(ANCHOR.findall(page.read_text(errors='replace')))
    return cache[page]


def static_links(page):
    """A listing page's links, resolved as the browser would."""
    links = []
    for href in HREF.findall(page.read_text(errors='replace')):
        href = html.unescape(href)
        if href.startswith(('javascript:', 'mailto:')):
            continue
        links.append(urllib.parse.urljoin(page.as_uri(), href))
    return links


def check(site, pages):
    """Returns {page: [problem, ...]} for every page with a problem."""
    loaded = [p for p in pages if not LISTING.search(p.name)]
    shares = [loaded[i::BROWSERS] for i in range(BROWSERS)]
    results = {p: {'problems': [], 'links': static_links(p)} for p in pages if LISTING.search(p.name)}
    with concurrent.futures.ThreadPoolExecutor(len(shares)) as pool:
        for part in pool.map(visit, shares):
            results.update(part)

    found = {page: list(r['problems']) for page, r in results.items()}
    site = site.resolve()
    for page, r in results.items():
        for href in sorted(set(r['links'])):
            url = urllib.parse.urlsplit(href)
            if url.scheme != 'file':
                continue
            target = pathlib.Path(urllib.parse.unquote(url.path))
            if target == page.resolve() and not url.fragment:
                continue
            if site not in target.parents:
                found[page].append(f'link to a file outside the site: {href}')
            elif not target.is_file():
                found[page].append(f'broken link: {target.relative_to(site)}')
            elif url.fragment and target.suffix == '.html' and \
                    urllib.parse.unquote(url.fragment) not in anchors_of(target):
                found[page].append(f'link to a missing anchor: {target.name}#{url.fragment}')
    return {page: p for page, p in found.items() if p}


def report(site, found):
    for page in sorted(found):
        print(f'  {page.relative_to(site)}:')
        for problem in found[page]:
            print(f'    {problem}')


def self_test(defects, mathjax):
    """Each page of DEFECTS names the problem it plants in its <title>: the check must report
    every one, and nothing on the page that plants none."""
    with tempfile.TemporaryDirectory() as tmp:
        site = pathlib.Path(tmp).resolve()
        for f in defects.iterdir():
            shutil.copy(f, site / f.name)
        (site / 'mathjax').symlink_to(mathjax.resolve())
        pages = sorted(site.glob('*.html'))
        found = check(site, pages)
        failed = False
        for page in pages:
            expect = page.read_text().split('<title>')[1].split('</title>')[0].strip()
            got = found.get(page, [])
            if expect == 'clean':
                ok = not got
            else:
                ok = any(expect in p for p in got)
            print(f'  {"ok  " if ok else "MISS"} {page.name}: expected "{expect}", got {got or "nothing"}')
            failed |= not ok
        return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('site', type=pathlib.Path, help='the html folder, or with --self-test the '
                        'folder of planted defects')
    parser.add_argument('--self-test', action='store_true',
                        help='check the planted defects of SITE are each found')
    parser.add_argument('--mathjax', type=pathlib.Path,
                        help='with --self-test: the MathJax folder the pages load')
    args = parser.parse_args()
    if not args.site.is_dir():
        parser.error(f'{args.site} is not a folder')

    t0 = time.monotonic()
    if args.self_test:
        if not args.mathjax or not (args.mathjax / 'MathJax.js').is_file():
            parser.error('--self-test needs --mathjax DIR holding MathJax.js')
        code = self_test(args.site, args.mathjax)
        print(f'check_site: the planted defects {"were all found" if code == 0 else "were NOT all found"}'
              f' ({time.monotonic() - t0:.0f} s)')
        return code

    args.site = args.site.resolve()
    pages = sorted(args.site.glob('*.html'))
    if not pages:
        parser.error(f'no .html pages in {args.site}')
    found = check(args.site, pages)
    elapsed = time.monotonic() - t0
    if found:
        report(args.site, found)
        n = sum(len(p) for p in found.values())
        print(f'check_site: {n} problem(s) on {len(found)} of {len(pages)} pages ({elapsed:.0f} s)')
        return 1
    print(f'check_site: {len(pages)} pages load cleanly in Chromium at {WIDTH} px, the front page and '
          f'the chapters at {PHONE_WIDTH} px too ({elapsed:.0f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
