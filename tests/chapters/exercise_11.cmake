# What the untouched stubs of exercises 11.1 to 11.3 must print when their tests fail
# (exercise_11.stub_fails): each exercise's message, in the order the tests run.
set(exercise_stub_messages
  "exercise_rope_rotate_row in chapters.*exercise_sliding_window_allowed in chapters.*exercise_append_and_attend in chapters")
