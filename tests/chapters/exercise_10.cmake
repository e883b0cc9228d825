# What the untouched stubs of exercises 10.1 to 10.3 must print when their tests fail
# (exercise_10.stub_fails): each exercise's message, in the order the tests run.
set(exercise_stub_messages
  "exercise_fold_key_tile in chapters.*exercise_merge_states in chapters.*exercise_weights_from_lse in chapters")
