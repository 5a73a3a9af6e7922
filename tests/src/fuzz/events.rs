//! CLAP event lists the fuzzer fills: parameter values (with and without cookies), modulation,
//! gestures, transport changes and note/MIDI events the plugin has no port for, in order or
//! not, and an output queue that may refuse events (a full host queue).

use std::ffi::c_void;
use std::ptr::null;

use clap_sys::events::{
    clap_event_header, clap_event_midi, clap_event_note, clap_event_param_gesture,
    clap_event_param_mod, clap_event_param_value, clap_event_transport, clap_input_events,
    clap_output_events, CLAP_CORE_EVENT_SPACE_ID, CLAP_EVENT_MIDI, CLAP_EVENT_NOTE_ON,
    CLAP_EVENT_PARAM_GESTURE_BEGIN, CLAP_EVENT_PARAM_GESTURE_END, CLAP_EVENT_PARAM_MOD,
    CLAP_EVENT_PARAM_VALUE, CLAP_EVENT_TRANSPORT,
};

/// One event of any type the fuzzer sends. Each variant is a `repr(C)` CLAP struct that starts
/// with its header, so a pointer to it is a pointer to its header.
#[derive(Clone, Copy)]
pub enum Event {
    /// `CLAP_EVENT_PARAM_VALUE`.
    ParamValue(clap_event_param_value),
    /// `CLAP_EVENT_PARAM_MOD`.
    ParamMod(clap_event_param_mod),
    /// `CLAP_EVENT_PARAM_GESTURE_BEGIN` / `_END`.
    Gesture(clap_event_param_gesture),
    /// `CLAP_EVENT_TRANSPORT`.
    Transport(clap_event_transport),
    /// `CLAP_EVENT_NOTE_ON` (the plugin has no note port: it must ignore it).
    Note(clap_event_note),
    /// `CLAP_EVENT_MIDI` (likewise).
    Midi(clap_event_midi),
}

impl Event {
    fn header(&self) -> *const clap_event_header {
        match self {
            Event::ParamValue(e) => &e.header,
            Event::ParamMod(e) => &e.header,
            Event::Gesture(e) => &e.header,
            Event::Transport(e) => &e.header,
            Event::Note(e) => &e.header,
            Event::Midi(e) => &e.header,
        }
    }

    /// The event's time in the block.
    pub fn time(&self) -> u32 {
        // SAFETY: `header` points into `self`.
        unsafe { (*self.header()).time }
    }
}

fn header<T>(time: u32, type_: u16) -> clap_event_header {
    clap_event_header {
        size: std::mem::size_of::<T>() as u32,
        time,
        space_id: CLAP_CORE_EVENT_SPACE_ID,
        type_,
        flags: 0,
    }
}

/// A parameter value event.
pub fn param_value(time: u32, param_id: u32, cookie: usize, value: f64) -> Event {
    Event::ParamValue(clap_event_param_value {
        header: header::<clap_event_param_value>(time, CLAP_EVENT_PARAM_VALUE),
        param_id,
        cookie: cookie as *mut c_void,
        note_id: -1,
        port_index: -1,
        channel: -1,
        key: -1,
        value,
    })
}

/// A parameter modulation event.
pub fn param_mod(time: u32, param_id: u32, amount: f64) -> Event {
    Event::ParamMod(clap_event_param_mod {
        header: header::<clap_event_param_mod>(time, CLAP_EVENT_PARAM_MOD),
        param_id,
        cookie: std::ptr::null_mut(),
        note_id: -1,
        port_index: -1,
        channel: -1,
        key: -1,
        amount,
    })
}

/// A gesture begin or end.
pub fn gesture(time: u32, param_id: u32, is_begin: bool) -> Event {
    let type_ = if is_begin {
        CLAP_EVENT_PARAM_GESTURE_BEGIN
    } else {
        CLAP_EVENT_PARAM_GESTURE_END
    };
    Event::Gesture(clap_event_param_gesture {
        header: header::<clap_event_param_gesture>(time, type_),
        param_id,
    })
}

/// A transport event at `time` (the fields are the caller's).
pub fn transport(time: u32, mut fields: clap_event_transport) -> Event {
    fields.header = header::<clap_event_transport>(time, CLAP_EVENT_TRANSPORT);
    Event::Transport(fields)
}

/// A note-on for a note port the plugin does not have.
pub fn note_on(time: u32, key: i16) -> Event {
    Event::Note(clap_event_note {
        header: header::<clap_event_note>(time, CLAP_EVENT_NOTE_ON),
        note_id: -1,
        port_index: 0,
        channel: 0,
        key,
        velocity: 0.8,
    })
}

/// A MIDI note-on for a port the plugin does not have.
pub fn midi(time: u32, data: [u8; 3]) -> Event {
    Event::Midi(clap_event_midi {
        header: header::<clap_event_midi>(time, CLAP_EVENT_MIDI),
        port_index: 0,
        data,
    })
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::ParamValue(e) => write!(
                f,
                "value@{} id {} = {}{}",
                e.header.time,
                e.param_id,
                e.value,
                if e.cookie.is_null() {
                    " (no cookie)"
                } else {
                    ""
                }
            ),
            Event::ParamMod(e) => {
                write!(f, "mod@{} id {} += {}", e.header.time, e.param_id, e.amount)
            }
            Event::Gesture(e) => write!(f, "gesture@{} id {}", e.header.time, e.param_id),
            Event::Transport(e) => write!(
                f,
                "transport@{} tempo {} flags {:#x}",
                e.header.time, e.tempo, e.flags
            ),
            Event::Note(e) => write!(f, "note@{} key {}", e.header.time, e.key),
            Event::Midi(e) => write!(f, "midi@{} {:?}", e.header.time, e.data),
        }
    }
}

/// An input event list (and the output queue's policy).
#[derive(Default)]
pub struct EventList {
    events: Vec<Event>,
}

impl EventList {
    /// An empty list with room for `capacity` events.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            events: Vec::with_capacity(capacity),
        }
    }

    /// Removes every event.
    pub fn clear(&mut self) {
        self.events.clear();
    }

    /// Appends an event (the caller keeps the list in time order unless it means not to).
    pub fn push(&mut self, event: Event) {
        self.events.push(event);
    }

    /// Sorts the events by time (stable), as CLAP requires of a host.
    pub fn sort(&mut self) {
        self.events.sort_by_key(Event::time);
    }

    /// The events, for reports.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether there are no events.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The list as `clap_input_events`, valid while `self` is neither moved nor changed.
    pub fn input(&self) -> clap_input_events {
        clap_input_events {
            ctx: self as *const EventList as *mut c_void,
            size: Some(input_size),
            get: Some(input_get),
        }
    }

    /// An output queue that accepts every event (`accepts`) or refuses every one (a full queue).
    pub fn output_sink(accepts: bool) -> clap_output_events {
        clap_output_events {
            ctx: std::ptr::null_mut(),
            try_push: Some(if accepts {
                output_accept
            } else {
                output_refuse
            }),
        }
    }
}

unsafe extern "C" fn input_size(list: *const clap_input_events) -> u32 {
    if list.is_null() {
        return 0;
    }
    // SAFETY: the context is the `EventList` that made this struct, alive for the call.
    unsafe { (*((*list).ctx as *const EventList)).events.len() as u32 }
}

unsafe extern "C" fn input_get(
    list: *const clap_input_events,
    index: u32,
) -> *const clap_event_header {
    if list.is_null() {
        return null();
    }
    // SAFETY: as for `input_size`.
    let events = unsafe { &(*((*list).ctx as *const EventList)).events };
    events.get(index as usize).map_or(null(), Event::header)
}

unsafe extern "C" fn output_accept(
    _: *const clap_output_events,
    event: *const clap_event_header,
) -> bool {
    !event.is_null()
}

unsafe extern "C" fn output_refuse(
    _: *const clap_output_events,
    _: *const clap_event_header,
) -> bool {
    false
}
