# What the untouched stubs of exercises 04.1 to 04.3 must print when their tests fail
# (exercise_04.stub_fails): each exercise's message, in the order the tests run.
set(exercise_stub_messages
  "exercise_log_sum_exp in chapters.*exercise_softmax_entropy in chapters.*exercise_attention_weights in chapters")
