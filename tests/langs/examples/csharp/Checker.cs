using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using Newtonsoft.Json;

// An example checker for kiln's csharp workspace: calls solution(a, b) for each pair and prints
// DESIGN.md's protocol, one JSON array of {"type", "value", "time", "output"} items, with
// Newtonsoft.Json.
public class Checker
{
    public static void Main(string[] args)
    {
        var pairs = new[] { Tuple.Create(1, 2), Tuple.Create(10, 20), Tuple.Create(-5, 5) };
        var stdout = Console.Out;
        var instance = new Solution();
        var items = new List<Dictionary<string, object>>();
        foreach (var pair in pairs)
        {
            var captured = new StringWriter();
            Console.SetOut(captured);
            var item = new Dictionary<string, object>();
            var watch = Stopwatch.StartNew();
            try
            {
                object value = instance.solution(pair.Item1, pair.Item2);
                item["type"] = "result";
                item["value"] = value;
            }
            catch (Exception e)
            {
                item["type"] = "error";
                item["value"] = e.Message;
            }
            watch.Stop();
            item["time"] = watch.Elapsed.TotalSeconds.ToString("F7", CultureInfo.InvariantCulture);
            item["output"] = captured.ToString();
            items.Add(item);
        }
        Console.SetOut(stdout);
        Console.WriteLine(JsonConvert.SerializeObject(items));
    }
}
