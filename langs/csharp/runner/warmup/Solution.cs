using System;

namespace KilnWarmup
{
    public class Solution
    {
        public int solution(int a, int b)
        {
            Console.WriteLine($"adding {a} and {b}");
            return a + b;
        }
    }
}
