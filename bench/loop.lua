-- Lua 5.4 baseline for examples/loop.hasm: sum over i in [0, n) of
-- (i mod 7)^2, in integer arithmetic (i, m and sum stay Lua integers).
--   usage: lua5.4 loop.lua N     prints the sum
local function loop(n)
  local sum = 0
  for i = 0, n - 1 do
    local m = i % 7
    sum = sum + m * m
  end
  return sum
end

local n = math.tointeger(tonumber(arg[1])) or error("usage: loop.lua N")
print(loop(n))
