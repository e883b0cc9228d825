set(exercise_stub_messages "exercise_query_scores in chapters.*exercise_stable_softmax in chapters.*exercise_query_output in chapters")
