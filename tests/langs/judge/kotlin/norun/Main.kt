// No main function: kotlinc builds MainKt, nothing can run it.
fun add(a: Long, b: Long): Long = a + b
