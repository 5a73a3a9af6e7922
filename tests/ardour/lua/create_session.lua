-- ardour7-lua create_session.lua <session_dir> <session_name> <sample_rate>
-- Creates an empty session (Dummy backend) with one stereo audio track "Mix", saves, exits.
local dir, name, rate = arg[1], arg[2], tonumber(arg[3])
assert(dir and name and rate, "usage: create_session.lua <dir> <name> <rate>")
assert(AudioEngine:set_backend("None (Dummy)", "", ""), "cannot select Dummy backend")
local s = create_session(dir, name, rate)
assert(s, "create_session failed")
local tl = Session:new_audio_track(2, 2, nil, 1, "Mix",
	ARDOUR.PresentationInfo.max_order, ARDOUR.TrackMode.Normal, true)
local n = 0
for t in tl:iter() do n = n + 1 end
assert(n == 1, "could not create track")
Session:save_state("")
print("@@ created " .. Session:name() .. " rate=" .. Session:nominal_sample_rate())
close_session()
