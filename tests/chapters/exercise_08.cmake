# What the untouched stubs of exercises 08.1 to 08.3 must print when their tests fail
# (exercise_08.stub_fails): each exercise's message, in the order the tests run.
set(exercise_stub_messages
  "exercise_layer_norm_rows in chapters.*exercise_position_wise_ffn in chapters.*exercise_ffn_sublayer in chapters")
