-- Lua 5.4 baseline for examples/fib.hasm: recursive Fibonacci.
--   usage: lua5.4 fib.lua N      prints fib(N)
local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local n = math.tointeger(tonumber(arg[1])) or error("usage: fib.lua N")
print(fib(n))
