pub mod netns;
