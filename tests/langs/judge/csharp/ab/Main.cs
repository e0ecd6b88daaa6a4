using System;

class Program
{
    static void Main()
    {
        var t = Console.In.ReadToEnd().Split((char[]) null, StringSplitOptions.RemoveEmptyEntries);
        Console.WriteLine(long.Parse(t[0]) + long.Parse(t[1]));
    }
}
