set(exercise_stub_messages "exercise_rnn_step in chapters.*exercise_rnn_forward in chapters.*exercise_jacobian_to_first_input in chapters")
