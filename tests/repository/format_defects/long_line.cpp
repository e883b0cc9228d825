// A planted fault for scripts/check_format.sh: a line past 100 columns, which it must report
// (ctest: format_check_catches_a_planted_fault). Never compiled.
int planted_fault(int first_argument, int second_argument, int third_argument, int fourth_argument) { return 0; }
