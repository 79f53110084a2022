-- Lua 5.4 (and LuaJIT -joff) baseline for examples/fib.hasm: recursive Fibonacci.
--   usage: lua5.4 fib.lua N      prints fib(N)
local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

-- LuaJIT (5.1) has no math.tointeger: its numbers are doubles, exact here.
local n = tonumber(arg[1])
if n and math.tointeger then n = math.tointeger(n) end
if not n then error("usage: fib.lua N") end
print(fib(n))
