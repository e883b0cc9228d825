# What the untouched stubs of exercises 05.1 to 05.3 must print when their tests fail
# (exercise_05.stub_fails): each exercise's message, in the order the tests run.
set(exercise_stub_messages
  "exercise_padding_masks in chapters.*exercise_causal_mask in chapters.*exercise_masked_softmax in chapters")
