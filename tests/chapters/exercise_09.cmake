# What the untouched stubs of exercises 09.1 to 09.3 must print when their tests fail
# (exercise_09.stub_fails): each exercise's message, in the order the tests run.
set(exercise_stub_messages
  "Your dS differs from the numerical gradient.*Your dS is all zeros.*exercise_linear_backward in chapters.*exercise_adam_step in chapters")
