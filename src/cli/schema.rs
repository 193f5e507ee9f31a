//! `casefile schema`: prints the GraphQL schema (SDL) the server serves.

pub fn run() {
    print!("{}", crate::api::sdl());
}
