//! Forms by id: their text, place and vars.
