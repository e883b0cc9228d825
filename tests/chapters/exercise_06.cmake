set(exercise_stub_messages "exercise_split_head in chapters.*exercise_head_attention in chapters.*exercise_multi_head_out in chapters")
