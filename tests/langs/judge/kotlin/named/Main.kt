// Written for another judge: main in an object, not at the top level (no MainKt runs).
object Solution {
    @JvmStatic
    fun main(args: Array<String>) {
        val (a, b) = readLine()!!.trim().split(Regex("\\s+")).map(String::toLong)
        println(add(a, b))
    }
}

fun add(a: Long, b: Long): Long = a + b
