set(exercise_stub_messages "exercise_column_attention in chapters.*exercise_scaled_scores in chapters.*exercise_attention_rows in chapters")
