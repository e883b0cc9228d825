// MathJax 2 breaks a formula wider than its column over several lines, at its operators and
// relations, instead of letting it run off the side: on a phone (390 px) a worked line such as
// "z = 0.5 * 2 + 0.25 + ... = 1, a = tanh 1 = 0.76159" is wider than the text column.
MathJax.Hub.Config({
  CommonHTML: { linebreaks: { automatic: true } }
});
