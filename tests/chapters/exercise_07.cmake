# What the untouched stubs of exercises 07.1 to 07.3 must print when their tests fail
# (exercise_07.stub_fails): each exercise's message, in the order the tests run.
set(exercise_stub_messages "exercise_sinusoidal_table in chapters.*exercise_shift_positions in chapters.*exercise_reorder_and_attend in chapters")
