# What the untouched stubs of exercises 12.1 to 12.3 must print when their tests fail
# (exercise_12.stub_fails): each exercise's message, in the order the tests run.
set(exercise_stub_messages
  "exercise_merge_pair in chapters.*exercise_nats_per_character in chapters.*exercise_sampling_probabilities in chapters")
