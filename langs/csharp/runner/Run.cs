// kiln's C# launcher: `mcs` then `mono check/checker.exe`, in one Mono process.
//
// Usage: mono runner/run.exe <output.exe> <mcs arguments...>
//
// The compiler is mcs.exe itself (found next to mscorlib), called through its library entry point
// Mono.CSharp.CompilerCallableEntryPoint.InvokeCompiler: the same parser and diagnostics as the
// `mcs` command, errors and warnings on stderr, status 1 on failure. The compiled program's entry
// point is then invoked as `mono <output.exe>` would invoke it (no arguments; its int result or
// Environment.ExitCode is the status), one runtime start cheaper. An exception escaping it is
// reported as Mono reports an unhandled exception, without this launcher's frames, status 1.
using System;
using System.IO;
using System.Reflection;
using System.Text;

public static class Run
{
    const string ReflectionFrame = "  at (wrapper managed-to-native) System.Reflection.RuntimeMethodInfo.InternalInvoke";

    public static int Main(string[] args)
    {
        if (args.Length < 1)
        {
            Console.Error.WriteLine("usage: mono run.exe <output.exe> <mcs arguments...>");
            return 2;
        }
        // UTF-8 whatever the locale (Mono takes the console's encoding from LANG/LC_ALL, which a
        // sandbox may not set): diagnostics, the program's output and its input.
        var utf8 = new UTF8Encoding(false);
        Console.OutputEncoding = utf8;
        Console.InputEncoding = utf8;
        string output = args[0];
        var mcsArgs = new string[args.Length];
        mcsArgs[0] = "-out:" + output;
        Array.Copy(args, 1, mcsArgs, 1, args.Length - 1);

        string mcsPath = Path.Combine(Path.GetDirectoryName(typeof(object).Assembly.Location), "mcs.exe");
        MethodInfo compile = Assembly.LoadFrom(mcsPath)
            .GetType("Mono.CSharp.CompilerCallableEntryPoint", true)
            .GetMethod("InvokeCompiler", new[] { typeof(string[]), typeof(TextWriter) });
        if (!(bool) compile.Invoke(null, new object[] { mcsArgs, Console.Error }))
        {
            return 1;
        }

        MethodInfo entry = Assembly.LoadFrom(output).EntryPoint;
        if (entry == null)
        {
            Console.Error.WriteLine("Cannot find entry point for " + output);
            return 1;
        }
        object result;
        try
        {
            result = entry.Invoke(null, entry.GetParameters().Length == 0 ? null : new object[] { new string[0] });
        }
        catch (TargetInvocationException e)
        {
            string text = e.InnerException.ToString();
            int cut = text.IndexOf(ReflectionFrame, StringComparison.Ordinal);
            if (cut >= 0)
            {
                text = text.Substring(0, cut).TrimEnd('\n');
            }
            Console.Out.Flush();
            Console.Error.WriteLine("Unhandled Exception:");
            Console.Error.WriteLine(text);
            Console.Error.WriteLine("[ERROR] FATAL UNHANDLED EXCEPTION: " + text);
            return 1;
        }
        return result is int ? (int) result : Environment.ExitCode;
    }
}
